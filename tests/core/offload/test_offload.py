"""Offloading queues and done items to zstandard segment files: watermarks, crash safety, the
lease, export/import, and the maintain loop."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from support.paths import TRACKER_BIN
from support.projects import new_project
from tracker_api.cli import main
from tracker_core import scripts
from tracker_core.admin import census_verbs, item_verbs, limit_verbs, project_verbs, segment_transfer
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import segment_file, segment_registry, staging
from tracker_core.offload.lease import NOT_HOLDER, Lease, LeaseLost

P = "off"
K = ProjectKeys(P)
ITEMS = [f"item-{i:05d}" for i in range(1000)]


@pytest.fixture
def project(admin):
    return new_project(admin, P, ITEMS)


def where(r, directory):
    """Every item's places: todo, out, files of registered segments, the offloading set."""
    places = {}
    for item in r.smembers(K.todo):
        places.setdefault(item, []).append("todo")
    for item in r.zrange(K.out, 0, -1):
        places.setdefault(item, []).append("out")
    for item in r.smembers(K.offloading):
        places.setdefault(item, []).append("offloading")
    for number in segment_registry.registry(r, K):
        for item in segment_file.read_segment(segment_file.segment_path(directory, P, number)):
            places.setdefault(item, []).append(f"segment {number}")
    return places


def assert_each_item_once(r, directory, items=ITEMS):
    places = where(r, directory)
    assert sorted(places) == sorted(items)
    assert all(len(p) == 1 for p in places.values()), [p for p in places.values() if len(p) > 1]


def test_excess_above_high_goes_to_segments_and_status_counts_them(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"}
    )
    moved = maintenance.maintain_project(r, P, tmp_path)
    assert moved == {"offloaded": 700, "refilled": 0}
    assert r.scard(K.todo) == 300
    assert sorted(segment_registry.registry(r, K).values()) == [100, 200, 200, 200]
    assert sorted(p.name for p in (tmp_path / P).iterdir()) == ["1.zst", "2.zst", "3.zst", "4.zst"]
    status = census_verbs.status(admin, P)
    assert (status["offloaded"], status["segments"], status["todo_total"]) == (700, 4, 300)
    assert int(r.hget(K.stats, "items_offloaded")) == 700
    assert_each_item_once(r, tmp_path)
    assert maintenance.maintain_project(r, P, tmp_path) == {"offloaded": 0, "refilled": 0}


def test_below_low_segments_come_back_oldest_first(project, admin, engine, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    engine.claim(P, "alice", "10.0.0.1", 250)
    first = set(segment_file.read_segment(segment_file.segment_path(tmp_path, P, 1)))
    assert maintenance.maintain_project(r, P, tmp_path) == {"offloaded": 0, "refilled": 200}
    assert first <= r.smembers(K.todo)
    assert not segment_file.segment_path(tmp_path, P, 1).exists()
    assert 1 not in segment_registry.registry(r, K)
    assert_each_item_once(r, tmp_path)


def test_turning_offloading_off_refills_everything(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "100", "offload_low": "50", "offload_segment_items": "50"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    assert maintenance.maintain_project(r, P, tmp_path)["refilled"] == 900
    assert r.scard(K.todo) == 1000 and segment_registry.registry(r, K) == {}


def test_the_whole_queue_drains_through_claims(project, admin, engine, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "150", "offload_low": "50", "offload_segment_items": "100"}
    )
    claimed = []
    for _ in range(200):
        maintenance.maintain_project(r, P, tmp_path)
        assert r.scard(K.todo) <= 150 + 100
        status, items = engine.claim(P, "alice", "10.0.0.1", 40)
        if status == 404 and not segment_registry.registry(r, K):
            break
        claimed += items
    assert sorted(claimed) == ITEMS


def stage(r, lease, count, source="todo"):
    """Stage COUNT items of SOURCE as a maintainer holding LEASE would; return (number, items)."""
    source_key = K.queue(source) if source != "done" else K.done
    reply = scripts.offload_stage(
        r, K, holder=lease.holder, source=source, source_key=source_key, count=count
    )
    return reply.code, reply.items


def commit(r, lease, number, n, source="todo"):
    return scripts.offload_commit(r, K, holder=lease.holder, number=number, count=n, source=source)


def refill(r, holder, number, queue, items):
    queue_key = K.queue(queue) if queue != "done" else K.done
    return scripts.refill(r, K, holder=holder, number=number, queue=queue, queue_key=queue_key, items=items)


def abort(r, holder, source, most):
    return scripts.offload_abort(r, K, holder=holder, source=source, source_key=K.todo, most=most)


@pytest.fixture
def lease(r):
    held = Lease(r, K, "node-a")
    assert held.take()
    return held


def test_crash_after_staging_puts_items_back(project, admin, r, tmp_path, lease):
    # A maintainer died after moving items to `offloading` and writing (but not registering) a file.
    number, staged = stage(r, lease, 300)
    assert len(staged) == 300 and r.hget(K.segment_queues, "#staged") == f"{number} todo"
    segment_file.write_segment(segment_file.segment_path(tmp_path, P, number), staged)
    assert census_verbs.status(admin, P)["offloaded"] == 300  # staged items are still counted
    assert stage(r, lease, 10) == (-2, [])
    assert staging.recover(r, K, tmp_path, lease) == 300
    assert r.scard(K.todo) == 1000 and not r.exists(K.offloading)
    assert not r.hexists(K.segment_queues, "#staged")
    assert not segment_file.segment_path(tmp_path, P, number).exists()  # its number: removed at once
    assert_each_item_once(r, tmp_path)


def test_commit_refuses_when_the_staged_set_differs(project, r, lease):
    number, _ = stage(r, lease, 10)
    assert commit(r, lease, number, 11) == 0
    assert commit(r, lease, number + 1, 10) == 0  # another number: not this staging
    assert commit(r, lease, number, 10, "backfeed") == 0  # another source
    assert r.scard(K.offloading) == 10 and segment_registry.registry(r, K) == {}
    assert commit(r, lease, number, 10) == 1


def test_crash_after_refill_leaves_only_a_stale_file(project, admin, r, tmp_path, lease):
    assert staging.offload_one(r, K, tmp_path, 500, lease) == 500
    path = segment_file.segment_path(tmp_path, P, 1)
    items = segment_file.read_segment(path)
    assert refill(r, lease.holder, 1, "todo", items[:-1]) == scripts.refill.codes.BAD_COUNT == -6
    # The script refuses a queue that is not the segment's source, before any write.
    assert refill(r, lease.holder, 1, "backfeed", items) == scripts.refill.codes.WRONG_SOURCE == -5
    assert refill(r, "node-b", 1, "todo", items) == scripts.refill.codes.NOT_HOLDER == -4
    assert refill(r, lease.holder, 1, "todo", items) == 500
    assert refill(r, lease.holder, 1, "todo", items) == scripts.refill.codes.NOT_REGISTERED == -1
    assert path.exists() and census_verbs.status(admin, P)["offloaded"] == 0  # not counted
    assert_each_item_once(r, tmp_path)
    assert staging.cleanup_files(r, K, tmp_path) == 0  # young: may be an import
    assert staging.cleanup_files(r, K, tmp_path, now_s=time.time() + staging.STALE_FILE_S + 1) == 1
    assert not path.exists()


def test_one_maintainer_holds_the_lease(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "500", "offload_low": "250", "offload_segment_items": "250"}
    )
    assert maintenance.maintain_once(r, "node-a", tmp_path) == {P: {"offloaded": 500, "refilled": 0}}
    assert maintenance.maintain_once(r, "node-b", tmp_path) == {P: {"lease": "held elsewhere"}}
    assert maintenance.maintain_once(r, "node-a", tmp_path) == {P: {"offloaded": 0, "refilled": 0}}
    assert r.get(K.maintain_lease) == "node-a"
    r.delete(K.maintain_lease)  # node-a's lease ran out
    assert maintenance.maintain_once(r, "node-b", tmp_path) == {P: {"offloaded": 0, "refilled": 0}}


def test_cli_maintain_list_export_import(project, admin, r, tmp_path, redis_url):
    from tracker_core.access import audit

    runner = CliRunner()
    seg_dir = str(tmp_path / "segs")

    def cli(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args])

    project_verbs.set_settings(
        admin, P, {"offload_high": "600", "offload_low": "200", "offload_segment_items": "400"}
    )
    res = cli("maintain", "--once", "--segments-dir", seg_dir, "--json")
    assert res.exit_code == 0 and '"offloaded": 400' in res.output
    assert (
        '"segments": {"1": {"items": 400, "source": "todo"}}' in cli("segments", "list", P, "--json").output
    )
    exported = tmp_path / "out.zst"
    res = cli("segments", "export", P, "1", str(exported), "--segments-dir", seg_dir)
    assert res.exit_code == 0 and "400 items" in res.output
    assert census_verbs.status(admin, P)["offloaded"] == 0 and int(r.hget(K.stats, "items_exported")) == 400
    assert cli("segments", "export", P, "1", str(exported), "--segments-dir", seg_dir).exit_code == 1
    res = cli("segments", "import", P, str(exported), "--segments-dir", seg_dir)
    assert res.exit_code == 0 and "imported 400 items" in res.output and "as segment" in res.output
    assert census_verbs.status(admin, P)["offloaded"] == 400
    assert_each_item_once(r, tmp_path / "segs")
    # A second import of the same file passes the Bloom filter: nothing is queued twice.
    res = cli("segments", "import", P, str(exported), "--segments-dir", seg_dir)
    assert res.exit_code == 0 and "imported 0 items" in res.output and "400 duplicates" in res.output
    entries = audit.read(r, P)["entries"]
    assert [e["action"] for e in entries[:3]] == ["segments.import", "segments.import", "segments.export"]
    assert entries[2]["detail"]["items"] == 400 and entries[2]["actor"] == "cli"
    assert entries[1]["detail"]["segment"] is not None and entries[0]["detail"]["duplicates"] == 400
    bad = tmp_path / "bad.zst"
    bad.write_bytes(b"not zstd")
    res = cli("segments", "import", P, str(bad), "--segments-dir", seg_dir)
    assert res.exit_code == 1 and "cannot read segment" in res.output
    assert census_verbs.status(admin, P)["offloaded"] == 400


def test_maintain_reclassifies_when_limits_change(project, admin, r, tmp_path):
    ages = {}
    assert maintenance.maintain_once(r, "node-a", tmp_path, ages)[P]["held"] == 0
    limit_verbs.add(admin, P, "low", "regex:^item-0000[0-9]$", "1/s", reclassify=False)
    assert r.zcard(K.limited) == 0
    assert maintenance.maintain_once(r, "node-a", tmp_path, ages)[P]["held"] == 10
    assert r.zcard(K.limited) == 10 and r.scard(K.todo) == 990
    assert "held" not in maintenance.maintain_once(r, "node-a", tmp_path, ages)[P]  # age unchanged


# -- the lease: renewed during long passes, checked by every script that moves items ------------


def test_lease_is_renewed_during_a_pass_and_released(r, project):
    lease = Lease(r, K, "node-a", lease_ms=300)
    assert lease.take() and 0 < r.pttl(K.maintain_lease) <= 300
    time.sleep(0.15)  # past a third of the lease: keep renews
    lease.keep()
    assert r.pttl(K.maintain_lease) > 200
    other = Lease(r, K, "node-b")
    assert not other.take()
    r.set(K.maintain_lease, "node-b")  # the lease moved on while node-a slept
    time.sleep(0.11)
    with pytest.raises(LeaseLost):
        lease.keep()
    lease.release()  # not the holder: changes nothing
    assert r.get(K.maintain_lease) == "node-b"
    other.release()
    assert not r.exists(K.maintain_lease)


class LosesLeaseMidPass(Lease):
    """node-a's lease runs out while it writes a segment file, and node-b makes a whole pass.

    keep() goes on believing the lease is held (as a process paused past its lease would), so
    only the scripts' own check of the holder can stop node-a.
    """

    def __init__(self, *args, other_pass, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.other_pass = other_pass

    def keep(self):
        self.calls += 1
        if self.calls == 2:  # after staging, before the commit
            self.client.delete(self.key)
            self.other_pass()


def test_lease_lost_mid_pass_changes_nothing_and_leaves_the_file_unregistered(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"}
    )
    b_reports = []

    def node_b_pass():
        b_reports.append(maintenance.maintain_project(r, P, tmp_path, holder="node-b"))

    a = LosesLeaseMidPass(r, K, "node-a", other_pass=node_b_pass)
    report = maintenance.maintain_project(r, P, tmp_path, lease=a)
    assert report["lease_lost"] is True and report["offloaded"] == 0
    # node-b put node-a's staged items back, then offloaded 700 itself (200 + 200 + 200 + 100).
    assert b_reports[0]["recovered"] == 200 and b_reports[0]["offloaded"] == 700
    assert sorted(segment_registry.registry(r, K).values()) == [100, 200, 200, 200]
    assert r.scard(K.todo) == 300 and not r.exists(K.offloading)
    assert_each_item_once(r, tmp_path)  # one copy of each item: none lost, none twice
    assert int(r.hget(K.stats, "items_offloaded")) == 700
    # node-a's file (segment 1) was never registered; node-b removed it when it took over.
    assert 1 not in segment_registry.registry(r, K) and not segment_file.segment_path(tmp_path, P, 1).exists()


def test_every_lease_checking_script_refuses_with_the_one_code_lease_checked_knows():
    refusals = {
        c.NOT_HOLDER
        for c in (
            scripts.offload_stage.codes,
            scripts.offload_commit.codes,
            scripts.offload_abort.codes,
            scripts.refill.codes,
        )
    }
    assert refusals == {NOT_HOLDER}


def test_every_segment_script_refuses_without_the_lease(project, r, lease, tmp_path):
    number, items = stage(r, lease, 100)
    thief = Lease(r, K, "node-b")
    r.delete(K.maintain_lease)
    assert thief.take()
    # node-a: every step refused, nothing changes.
    assert stage(r, lease, 10) == (-4, [])
    assert commit(r, lease, number, 100) == -4
    assert abort(r, lease.holder, "todo", 1000) == (-4, 0)
    assert r.scard(K.offloading) == 100 and r.scard(K.todo) == 900
    # node-b aborts node-a's staging and stages its own; node-a's commit still cannot land.
    assert staging.recover(r, K, tmp_path, thief) == 100
    number_b, _ = stage(r, thief, 50)
    assert commit(r, lease, number, 50) == -4
    r.set(K.maintain_lease, "node-a")  # even back in node-a's hands: not its set
    assert commit(r, lease, number, 50) == 0
    r.set(K.maintain_lease, "node-b")
    assert commit(r, thief, number_b, 50) == 1
    assert segment_registry.registry(r, K) == {number_b: 50}
    with pytest.raises(LeaseLost):
        staging.offload_one(r, K, tmp_path, 10, lease)


# -- crashes between steps, and what an abort costs ----------------------------------------------


def test_abort_moves_staged_items_back_in_bounded_chunks(project, r, lease, tmp_path, monkeypatch):
    # An abort never rebuilds the queue (SUNIONSTORE todo todo offloading was O(todo)): each
    # call moves at most the chunk it is given, and a crash between calls loses nothing.
    number, _ = stage(r, lease, 700, "todo")
    assert abort(r, lease.holder, "backfeed", 100) == (-5, 0)
    assert abort(r, lease.holder, "todo", 250) == (250, 450)
    assert r.scard(K.todo) == 550 and r.hget(K.segment_queues, "#staged") == f"{number} todo"
    assert admin_counts(r) == 1000  # "crash" here: every item is still counted
    monkeypatch.setattr(staging, "ABORT_CHUNK", 100)  # what recover reads
    assert staging.recover(r, K, tmp_path, lease) == 450
    assert r.scard(K.todo) == 1000 and not r.hexists(K.segment_queues, "#staged")
    r.config_resetstat()
    abort(r, lease.holder, "todo", 100)  # nothing staged
    assert "cmdstat_sunionstore" not in r.info("commandstats")


def admin_counts(r):
    """Items in todo plus items offloaded or staged (what status counts for this project)."""
    return r.scard(K.todo) + r.scard(K.offloading) + sum(segment_registry.registry(r, K).values())


def test_crash_during_refill_file_is_cleaned_on_startup(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "500", "offload_low": "250", "offload_segment_items": "250"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    path = segment_file.segment_path(tmp_path, P, 1)
    lease = Lease(r, K, "node-a")
    assert lease.take()
    items = segment_file.read_segment(path)
    refill(r, lease.holder, 1, "todo", items)  # ... and the maintainer died here
    lease.release()
    old = time.time() - staging.STALE_FILE_S - 5
    os.utime(path, (old, old))
    leftover = tmp_path / P / "7.0123abcd.part"  # a temp file of a write that never finished
    leftover.write_bytes(b"x")
    os.utime(leftover, (old, old))
    assert not r.exists(K.offloading)  # nothing staged: cleanup runs anyway
    report = maintenance.Maintainer(r, tmp_path, "node-b", stats_upkeep=False).pass_once()
    assert report[P]["files_removed"] == 2
    assert not path.exists() and not leftover.exists()
    assert segment_file.segment_path(tmp_path, P, 2).exists()  # registered: kept
    assert_each_item_once(r, tmp_path)


def test_a_missing_segment_file_does_not_stop_the_others(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "350", "offload_low": "50", "offload_segment_items": "300"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    segment_file.segment_path(tmp_path, P, 1).unlink()
    segment_file.segment_path(tmp_path, P, 2).write_bytes(b"not zstd")
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    report = maintenance.maintain_project(r, P, tmp_path)
    assert report["refilled"] == 50 and report["unreadable_segments"] == [1, 2]
    assert sorted(segment_registry.registry(r, K)) == [1, 2]  # still counted, for an admin to look at


# -- other queues and done items ----------------------------------------------------------------


def test_backfeed_secondary_and_redo_are_offloaded_and_refilled_into_their_own_queue(
    admin, engine, r, tmp_path
):
    project_verbs.create(admin, P)
    names = {q: [f"{q}-{i:04d}" for i in range(500)] for q in ("todo", "backfeed", "secondary", "redo")}
    for queue, items in names.items():
        item_verbs.add(admin, P, items, queue=queue)
    project_verbs.set_settings(
        admin, P, {"offload_high": "200", "offload_low": "100", "offload_segment_items": "100"}
    )
    report = maintenance.maintain_project(r, P, tmp_path)
    assert report["offloaded"] == 4 * 300
    assert {q: v["offloaded"] for q, v in report["by_queue"].items()} == dict.fromkeys(names, 300)
    status = census_verbs.status(admin, P)
    assert status["offloaded"] == 1200 and status["offloaded_queues"] == dict.fromkeys(names, 300)
    assert all(status["queues"][q] == 200 for q in names)
    sources = segment_registry.segment_sources(r, K)
    for number, source in sources.items():
        assert {
            i.split("-")[0] for i in segment_file.read_segment(segment_file.segment_path(tmp_path, P, number))
        } == {source}
    # Drain everything through claims: each queue gets its own segments back.
    claimed = []
    for _ in range(500):
        maintenance.maintain_project(r, P, tmp_path)
        for q in names:
            assert r.scard(K.queue(q)) <= 200 + 100
            for item in r.smembers(K.queue(q)):
                assert item.startswith(q + "-")
        status_code, items = engine.claim(P, "alice", "10.0.0.1", 60)
        if status_code == 404 and not segment_registry.registry(r, K):
            break
        claimed += items
    assert sorted(claimed) == sorted(i for items in names.values() for i in items)


def test_done_items_beyond_the_watermark_go_to_segments_and_never_come_back(
    project, admin, engine, r, tmp_path
):
    project_verbs.set_settings(
        admin, P, {"done_mode": "offload", "done_offload_high": "100", "offload_segment_items": "250"}
    )
    status_code, items = engine.claim(P, "alice", "10.0.0.1", 100)
    for _ in range(3):
        _, more = engine.claim(P, "alice", "10.0.0.1", 100)
        items += more
    engine.done(P, "alice", "1", items, [], "")
    assert r.scard(K.done) == 400
    report = maintenance.maintain_project(r, P, tmp_path)
    assert report["done_offloaded"] == 300 and report["offloaded"] == 0
    assert r.scard(K.done) == 100 and r.scard(K.todo) == 600
    status = census_verbs.status(admin, P)
    assert (status["done"], status["done_kept"], status["done_offloaded"]) == (400, 100, 300)
    assert status["offloaded"] == 0 and status["todo_total"] == 600
    assert int(r.hget(K.stats, "done_items_offloaded")) == 300
    done_segments = [n for n, q in segment_registry.segment_sources(r, K).items() if q == "done"]
    on_disk = {
        i for n in done_segments for i in segment_file.read_segment(segment_file.segment_path(tmp_path, P, n))
    }
    assert on_disk | r.smembers(K.done) == set(items) and len(on_disk) == 300
    # Turning queue offloading off refills queue segments only; done segments stay on disk.
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    assert maintenance.maintain_project(r, P, tmp_path)["refilled"] == 0
    assert r.scard(K.todo) == 600
    lease = Lease(r, K, "node-a")
    assert lease.take()
    n = done_segments[0]
    assert (
        refill(
            r, lease.holder, n, "done", segment_file.read_segment(segment_file.segment_path(tmp_path, P, n))
        )
        == -5
    )
    # Claims never hand a done item out again.
    _, rest = engine.claim(P, "bob", "10.0.0.2", 100)
    assert not set(rest) & set(items)


def test_done_mode_offload_is_a_valid_setting(admin):
    project_verbs.create(admin, P, {"done_mode": "offload"})
    with pytest.raises(ValueError, match="keep, discard or offload"):
        project_verbs.set_settings(admin, P, {"done_mode": "archive"})


# -- export and import --------------------------------------------------------------------------


def test_importing_the_same_segment_twice_does_not_duplicate(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "600", "offload_low": "200", "offload_segment_items": "400"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    out = tmp_path / "out.zst"
    assert segment_transfer.export_segment(r, K, tmp_path, 1, out) == 400
    exported = segment_file.read_segment(out)
    assert census_verbs.status(admin, P)["offloaded"] == 0
    first = segment_transfer.import_segment(r, K, tmp_path, out)
    assert first["items"] == 400 and first["segment"] is not None
    second = segment_transfer.import_segment(r, K, tmp_path, out)
    assert second == {"segment": None, "items": 0, "duplicates": 400}
    assert census_verbs.status(admin, P)["offloaded"] == 400
    assert_each_item_once(r, tmp_path)
    # Once refilled and claimed, a third import still brings nothing back.
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    maintenance.maintain_project(r, P, tmp_path)
    assert segment_transfer.import_segment(r, K, tmp_path, out)["items"] == 0
    assert r.scard(K.todo) == 1000 and set(exported) <= r.smembers(K.todo)


def test_a_foreign_segment_is_deduplicated_through_the_bloom_filter(project, admin, r, tmp_path):
    foreign = tmp_path / "foreign.zst"
    segment_file.write_segment(foreign, ["item-00001", "item-00002", "new-1", "new-2", "new-2"])
    result = segment_transfer.import_segment(r, K, tmp_path, foreign, queue="secondary")
    assert result == {"segment": None, "items": 2, "duplicates": 3}
    assert r.smembers(K.secondary) == {"new-1", "new-2"} and r.scard(K.todo) == 1000
    assert segment_transfer.import_segment(r, K, tmp_path, foreign)["items"] == 0
    with pytest.raises(segment_registry.OffloadError, match="unknown project"):
        segment_transfer.import_segment(r, ProjectKeys("nope"), tmp_path, foreign)


def test_an_imported_name_may_be_as_long_as_a_done_takes_and_no_longer(project, admin, r, tmp_path):
    longest = "https://example.com/" + "a%20b/" * 600
    longest = longest + "x" * (4096 - len(longest))
    assert len(longest) == 4096
    at_limit, past = tmp_path / "at.zst", tmp_path / "past.zst"
    segment_file.write_segment(at_limit, ["https://example.com/ok?q=1#f", longest])
    segment_file.write_segment(past, ["https://example.com/fine", longest + "y"])
    before = r.scard(K.todo)
    with pytest.raises(
        segment_registry.OffloadError, match="item 2 of .* longer than 4096 characters: nothing"
    ):
        segment_transfer.import_segment(r, K, tmp_path, past)
    assert r.scard(K.todo) == before and not r.sismember(K.todo, "https://example.com/fine")
    assert segment_transfer.import_segment(r, K, tmp_path, at_limit)["items"] == 2
    assert r.sismember(K.todo, longest)


def test_deleting_a_project_removes_its_segment_files(project, admin, r, tmp_path):
    project_verbs.set_settings(
        admin, P, {"offload_high": "500", "offload_low": "250", "offload_segment_items": "250"}
    )
    maintenance.maintain_project(r, P, tmp_path)
    assert (tmp_path / P).is_dir()
    project_verbs.delete(admin, P)
    maintenance.Maintainer(r, tmp_path, "node-a", stats_upkeep=False).pass_once()
    assert not (tmp_path / P).exists() and not r.smembers("tracker:segments_deleted")


def test_a_project_created_again_keeps_its_new_segments(project, admin, r, tmp_path):

    project_verbs.delete(admin, P)
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ["again-1", "again-2", "again-3"])
    project_verbs.set_settings(
        admin, P, {"offload_high": "2", "offload_low": "1", "offload_segment_items": "1"}
    )
    maintenance.Maintainer(r, tmp_path, "node-a", stats_upkeep=False).pass_once()
    assert sum(segment_registry.registry(r, K).values()) == 1
    assert all(segment_file.segment_path(tmp_path, P, n).exists() for n in segment_registry.registry(r, K))


# -- the maintain loop: survives errors, keeps statistics up, is restarted ----------------------


def test_the_loop_survives_a_bad_directory_and_a_redis_outage(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis", port=free_port())
    server.start()
    lines = []
    stop = threading.Event()
    try:
        admin = AdminContext.from_url(server.url)
        project_verbs.create(
            admin, P, {"offload_high": "100", "offload_low": "50", "offload_segment_items": "50"}
        )
        item_verbs.add(admin, P, ITEMS[:300])
        blocked = tmp_path / "segs"
        blocked.write_text("a file where the segment directory should be")
        maintainer = maintenance.Maintainer(admin.conn, blocked, "node-a", log=lines.append)
        thread = threading.Thread(
            target=maintainer.run, args=(0.05, stop), kwargs={"max_backoff_s": 0.2}, daemon=True
        )
        thread.start()
        wait_until(lambda: any("NotADirectoryError" in line for line in lines))
        assert admin.conn.scard(K.todo) == 300 and not admin.conn.exists(K.offloading)
        blocked.unlink()  # the operator fixes it
        wait_until(lambda: admin.conn.scard(K.todo) == 100)
        server.stop()  # Redis goes away ...
        wait_until(lambda: any("pass failed" in line for line in lines))
        server.start()  # ... and comes back
        item_verbs.add(admin, P, ITEMS[300:500])
        wait_until(
            lambda: (
                admin.conn.scard(K.todo) == 100
                and sum(segment_registry.registry(admin.conn, K).values()) == 400
            )
        )
        assert thread.is_alive()
        assert all("\n" not in line for line in lines)
        stop.set()
        thread.join(5)
        assert not admin.conn.exists(K.maintain_lease)  # given up on the way out
    finally:
        stop.set()
        server.stop()


def wait_until(condition, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_each_pass_keeps_the_statistics_rolled_up(project, r, tmp_path):
    from tracker_core.figures import stats

    now_ms = int(time.time() * 1000)
    hour = now_ms // stats.HOUR_MS - 10  # ten hours ago, nobody looked since
    r.hset(K.minute(hour * 60 + 5), mapping={"items_done": 7, "requests": 9})
    r.hset(K.minute(hour * 60 + 6), "items_done", 3)
    maintenance.Maintainer(r, tmp_path, "node-a").pass_once()
    assert r.hgetall(K.hour(hour)) == {"minutes": "2", "items_done": "10", "requests": "9"}
    assert r.hget(K.minute(now_ms // stats.MINUTE_MS), "backlog") == "1000"


def test_supervised_maintain_is_restarted_when_it_dies(project, admin, r, redis_url, tmp_path):
    proc = subprocess.Popen(
        [
            str(TRACKER_BIN),
            "--redis-url",
            redis_url,
            "--data-dir",
            str(tmp_path),
            "maintain",
            "--supervise",
            "--interval",
            "0.1",
        ],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: r.get(K.maintain_lease))
        first = r.get(K.maintain_lease)
        child_pid = int(first.split(":")[1])
        os.kill(child_pid, signal.SIGKILL)
        r.delete(K.maintain_lease)  # rather than wait 30 s for it to expire
        wait_until(lambda: r.get(K.maintain_lease) not in (None, first))
        assert int(r.get(K.maintain_lease).split(":")[1]) != child_pid
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert "restarting" in proc.stderr.read()


# -- the package's place in the layers ---------------------------------------------------------


def test_the_registry_vocabulary_imports_alone():
    # census and todo can read DONE, STAGED_FIELD and QUEUES without loading the filesystem side.
    code = (
        "import sys; from tracker_core.offload.segment_registry import DONE, STAGED_FIELD, QUEUES; "
        "print(sorted(m for m in sys.modules if m.startswith('tracker_core')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == str(
        [
            "tracker_core",
            "tracker_core.keyspace",
            "tracker_core.offload",
            "tracker_core.offload.segment_registry",
        ]
    )
