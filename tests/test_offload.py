"""Offloading todo to zstandard segment files: watermarks, crash safety, lease, export/import."""
import time

import pytest
from click.testing import CliRunner

from tracker_api.cli import main
from tracker_core import offload, scripts
from tracker_core.keys import ProjectKeys

P = "off"
K = ProjectKeys(P)
ITEMS = [f"item-{i:05d}" for i in range(1000)]


@pytest.fixture
def project(admin):
    admin.create_project(P)
    list(admin.add_items(P, ITEMS))
    return P


def where(r, directory):
    """Every item's places: todo, out, files of registered segments, the offloading set."""
    places = {}
    for item in r.smembers(K.todo):
        places.setdefault(item, []).append("todo")
    for item in r.zrange(K.out, 0, -1):
        places.setdefault(item, []).append("out")
    for item in r.smembers(K.offloading):
        places.setdefault(item, []).append("offloading")
    for number in offload.registry(r, K):
        for item in offload.read_segment(offload.segment_path(directory, P, number)):
            places.setdefault(item, []).append(f"segment {number}")
    return places


def assert_each_item_once(r, directory, items=ITEMS):
    places = where(r, directory)
    assert sorted(places) == sorted(items)
    assert all(len(p) == 1 for p in places.values()), [p for p in places.values() if len(p) > 1]


def test_excess_above_high_goes_to_segments_and_status_counts_them(project, admin, r, tmp_path):
    admin.set_settings(P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"})
    moved = offload.maintain_project(r, P, tmp_path)
    assert moved == {"offloaded": 700, "refilled": 0}
    assert r.scard(K.todo) == 300
    assert sorted(offload.registry(r, K).values()) == [100, 200, 200, 200]
    assert sorted(p.name for p in (tmp_path / P).iterdir()) == ["1.zst", "2.zst", "3.zst", "4.zst"]
    status = admin.status(P)
    assert (status["offloaded"], status["segments"], status["todo_total"]) == (700, 4, 300)
    assert int(r.hget(K.stats, "items_offloaded")) == 700
    assert_each_item_once(r, tmp_path)
    assert offload.maintain_project(r, P, tmp_path) == {"offloaded": 0, "refilled": 0}


def test_below_low_segments_come_back_oldest_first(project, admin, engine, r, tmp_path):
    admin.set_settings(P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"})
    offload.maintain_project(r, P, tmp_path)
    engine.claim(P, "alice", "10.0.0.1", 250)
    first = set(offload.read_segment(offload.segment_path(tmp_path, P, 1)))
    assert offload.maintain_project(r, P, tmp_path) == {"offloaded": 0, "refilled": 200}
    assert first <= r.smembers(K.todo)
    assert not offload.segment_path(tmp_path, P, 1).exists()
    assert 1 not in offload.registry(r, K)
    assert_each_item_once(r, tmp_path)


def test_turning_offloading_off_refills_everything(project, admin, r, tmp_path):
    admin.set_settings(P, {"offload_high": "100", "offload_segment_items": "500"})
    offload.maintain_project(r, P, tmp_path)
    admin.set_settings(P, {"offload_high": "0"})
    assert offload.maintain_project(r, P, tmp_path)["refilled"] == 900
    assert r.scard(K.todo) == 1000 and offload.registry(r, K) == {}


def test_the_whole_queue_drains_through_claims(project, admin, engine, r, tmp_path):
    admin.set_settings(P, {"offload_high": "150", "offload_low": "50", "offload_segment_items": "100"})
    claimed = []
    for _ in range(200):
        offload.maintain_project(r, P, tmp_path)
        assert r.scard(K.todo) <= 150 + 100
        status, items = engine.claim(P, "alice", "10.0.0.1", 40)
        if status == 404 and not offload.registry(r, K):
            break
        claimed += items
    assert sorted(claimed) == ITEMS


def test_crash_after_staging_puts_items_back(project, admin, r, tmp_path):
    # A maintainer died after moving items to `offloading` and writing (but not registering) a file.
    assert scripts.run(r, "offload_stage", (K.todo, K.offloading), (300,)) == 300
    staged = sorted(r.smembers(K.offloading))
    offload.write_segment(offload.segment_path(tmp_path, P, 99), staged)
    assert admin.status(P)["offloaded"] == 300          # staged items are still counted
    assert scripts.run(r, "offload_stage", (K.todo, K.offloading), (10,)) == -2
    assert offload.recover(r, K, tmp_path) == 300
    assert r.scard(K.todo) == 1000 and not r.exists(K.offloading)
    assert offload.segment_path(tmp_path, P, 99).exists()  # may be young: kept for now
    offload.recover(r, K, tmp_path, now_s=time.time() + offload.STALE_FILE_S + 1)
    assert not offload.segment_path(tmp_path, P, 99).exists()
    assert_each_item_once(r, tmp_path)


def test_commit_refuses_when_the_staged_set_differs(project, r):
    scripts.run(r, "offload_stage", (K.todo, K.offloading), (10,))
    assert scripts.run(r, "offload_commit", (K.offloading, K.segments, K.stats), (1, 11)) == 0
    assert r.scard(K.offloading) == 10 and offload.registry(r, K) == {}


def test_crash_after_refill_leaves_only_a_stale_file(project, admin, r, tmp_path):
    admin.set_settings(P, {"offload_high": "500", "offload_segment_items": "500"})
    offload.maintain_project(r, P, tmp_path)
    path = offload.segment_path(tmp_path, P, 1)
    items = offload.read_segment(path)
    assert scripts.run(r, "refill", (K.segments, K.todo, K.stats), (1, *items)) == 500
    assert scripts.run(r, "refill", (K.segments, K.todo, K.stats), (1, *items)) == -1
    assert path.exists() and admin.status(P)["offloaded"] == 0   # not counted
    assert_each_item_once(r, tmp_path)
    offload.recover(r, K, tmp_path, now_s=time.time() + offload.STALE_FILE_S + 1)
    assert not path.exists()


def test_one_maintainer_holds_the_lease(project, admin, r, tmp_path):
    admin.set_settings(P, {"offload_high": "500"})
    assert offload.maintain_once(r, "node-a", tmp_path) == {P: {"offloaded": 500, "refilled": 0}}
    assert offload.maintain_once(r, "node-b", tmp_path) is None
    assert offload.maintain_once(r, "node-a", tmp_path) == {P: {"offloaded": 0, "refilled": 0}}
    r.delete("tracker:maintain_lease")                      # node-a's lease ran out
    assert offload.maintain_once(r, "node-b", tmp_path) is not None


def test_cli_maintain_list_export_import(project, admin, r, tmp_path, redis_url):
    runner = CliRunner()
    seg_dir = str(tmp_path / "segs")

    def cli(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args])
    admin.set_settings(P, {"offload_high": "600", "offload_segment_items": "400"})
    res = cli("maintain", "--once", "--segments-dir", seg_dir)
    assert res.exit_code == 0 and '"offloaded": 400' in res.output
    assert cli("segments", "list", P).output.strip() == '{"1": 400}'
    exported = tmp_path / "out.zst"
    res = cli("segments", "export", P, "1", str(exported), "--segments-dir", seg_dir)
    assert res.exit_code == 0 and "400 items" in res.output
    assert admin.status(P)["offloaded"] == 0 and int(r.hget(K.stats, "items_exported")) == 400
    assert cli("segments", "export", P, "1", str(exported), "--segments-dir", seg_dir).exit_code == 2
    res = cli("segments", "import", P, str(exported), "--segments-dir", seg_dir)
    assert res.exit_code == 0 and "imported 400 items" in res.output
    assert admin.status(P)["offloaded"] == 400
    assert_each_item_once(r, tmp_path / "segs")
    bad = tmp_path / "bad.zst"
    bad.write_bytes(b"not zstd")
    res = cli("segments", "import", P, str(bad), "--segments-dir", seg_dir)
    assert res.exit_code == 2 and "cannot read segment" in res.output
    assert admin.status(P)["offloaded"] == 400


def test_maintain_reclassifies_when_limits_change(project, admin, r, tmp_path):
    ages = {}
    assert offload.maintain_once(r, "node-a", tmp_path, ages)[P]["held"] == 0
    admin.add_limit(P, "low", "regex:^item-0000[0-9]$", "1/s", reclassify=False)
    assert r.zcard(K.limited) == 0
    assert offload.maintain_once(r, "node-a", tmp_path, ages)[P]["held"] == 10
    assert r.zcard(K.limited) == 10 and r.scard(K.todo) == 990
    assert "held" not in offload.maintain_once(r, "node-a", tmp_path, ages)[P]   # age unchanged
