"""The done log as the record of the archive (tracker_core.donelog.log_archive, log_archive-4.lua).

Every completion is kept: maintain archives the entries beyond log_maxlen to zstandard segment
files of JSON lines and only then trims them, so a crash at any point loses and duplicates
nothing; export and the admin API read the files, then the stream, in order.
"""

import io
import json
import signal
import subprocess
import sys
import time

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from support.projects import new_project
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_api.web.config import AppConfig
from tracker_core import scripts
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.donelog import log_archive, log_reader
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload.lease import Lease

P = "dl"
K = ProjectKeys(P)


def url(n: int, size: int = 120) -> str:
    head = f"https://example.com/a b/{n}?q=%2F&x=ü#frag/"
    return head + "z" * (size - len(head))


@pytest.fixture
def project(admin):
    return new_project(admin, P, settings={"log_maxlen": "10"})


def finish(admin, engine, names, downloader="alice", domains=("example.com", 100), ident='{"n": 1}'):
    """Queue NAMES, claim them as DOWNLOADER and report them done in one call."""
    item_verbs.add(admin, P, names)
    status, claimed = engine.claim(P, downloader, "10.0.0.1", len(names))
    assert status == 200 and sorted(claimed) == sorted(names)
    assert engine.done(P, downloader, "1.2", claimed, list(domains), ident).new == len(names)
    return claimed


def export(admin, directory, **kw):
    out = io.BytesIO()
    log_reader.export(admin.conn, K, directory, out, **kw)
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def lease(r, holder="node-a"):
    held = Lease(r, K, holder)
    assert held.take()
    return held


SERIAL = iter(range(10**9))


def done_entries(admin, engine, count, downloader="alice"):
    """COUNT done calls of one new URL item each; returns the names in order."""
    names = []
    for _ in range(count):
        names += finish(admin, engine, [url(next(SERIAL))], downloader)
    return names


# -- archiving ----------------------------------------------------------------------------------


def test_entries_beyond_the_watermark_go_to_segments_and_export_returns_each_once(
    project, admin, engine, r, tmp_path
):
    names = done_entries(admin, engine, 35)
    assert r.xlen(K.log) == 35
    report = maintenance.maintain_project(r, P, tmp_path)
    assert report["log_archived"] == 25 and r.xlen(K.log) == 10
    assert [s[3] for s in log_archive.registry(r, K)] == [25]
    assert (tmp_path / P / "log" / "1.jsonl.zst").exists()
    rows = export(admin, tmp_path)
    assert [row["items"] for row in rows] == [[n] for n in names]
    assert [row["entry"] for row in rows] == sorted({row["entry"] for row in rows}, key=log_archive.parse_id)
    first = rows[0]
    assert set(first) == {"entry", "at", "downloader", "ip", "items", "bytes", "domains", "version", "id"}
    assert (first["downloader"], first["bytes"], first["domains"], first["version"], first["id"]) == (
        "alice",
        100,
        {"example.com": 100},
        "1.2",
        {"n": 1},
    )
    assert first["at"] == 1_700_000_000_000
    assert int(r.hget(K.stats, "log_entries_archived")) == 25
    # A second pass has nothing to do; more dones are archived into a second segment.
    assert "log_archived" not in maintenance.maintain_project(r, P, tmp_path)
    names += done_entries(admin, engine, 5)
    assert maintenance.maintain_project(r, P, tmp_path)["log_archived"] == 5
    assert [row["items"][0] for row in export(admin, tmp_path)] == names


def test_a_watermark_of_zero_archives_everything_in_bounded_segments(project, admin, engine, r, tmp_path):
    project_verbs.set_settings(admin, P, {"log_maxlen": "0"})
    names = done_entries(admin, engine, 12)
    k_lease = lease(r)
    assert log_archive.archive(r, K, tmp_path, k_lease, per_segment=5) == 12
    assert [s[3] for s in log_archive.registry(r, K)] == [5, 5, 2] and r.xlen(K.log) == 0
    assert [row["items"][0] for row in export(admin, tmp_path)] == names


def test_segments_close_at_their_byte_bound_but_never_cut_an_entry(project, admin, engine, r, tmp_path):
    big = [url(n, 4096) for n in range(20)]
    first, second = finish(admin, engine, big[:10]), finish(admin, engine, big[10:])
    assert log_archive.archive(r, K, tmp_path, lease(r), keep=0, max_bytes=1000) == 2
    assert [s[3] for s in log_archive.registry(r, K)] == [1, 1]
    assert [row["items"] for row in export(admin, tmp_path)] == [first, second]


# -- crash safety -------------------------------------------------------------------------------


def state(r):
    return r.xrange(K.log), r.hgetall(K.log_segments)


def test_an_exception_between_the_file_and_the_trim_loses_and_duplicates_nothing(
    project, admin, engine, r, tmp_path, monkeypatch
):
    names = done_entries(admin, engine, 30)
    stream_before = r.xrange(K.log)

    def crash(path):
        assert path.exists()  # durable before the script runs
        raise RuntimeError("injected")

    monkeypatch.setattr(log_archive, "_after_write", crash)
    with pytest.raises(RuntimeError, match="injected"):
        maintenance.maintain_project(r, P, tmp_path)
    assert r.xrange(K.log) == stream_before and log_archive.registry(r, K) == []
    assert [row["items"][0] for row in export(admin, tmp_path)] == names  # the file is not read
    monkeypatch.setattr(log_archive, "_after_write", None)
    assert maintenance.maintain_project(r, P, tmp_path)["log_archived"] == 20
    assert [row["items"][0] for row in export(admin, tmp_path)] == names
    # The unregistered file of the failed pass goes once stale; the registered one stays.
    files = sorted(p.name for p in (tmp_path / P / "log").iterdir())
    assert files == ["1.jsonl.zst", "2.jsonl.zst"]
    assert log_archive.cleanup(r, K, tmp_path, now_s=time.time() + 601) == 1
    assert [p.name for p in (tmp_path / P / "log").iterdir()] == ["2.jsonl.zst"]
    assert [row["items"][0] for row in export(admin, tmp_path)] == names


KILLED_ARCHIVER = """
import os, signal, sys
from tracker_core.donelog import log_archive
from tracker_core.maintainer import maintenance
from tracker_core.offload.lease import Lease
from tracker_core.admin.context import AdminContext
from tracker_core.keyspace import ProjectKeys
log_archive._after_write = lambda path: os.kill(os.getpid(), signal.SIGKILL)
r = AdminContext.from_url(sys.argv[1]).conn
maintenance.maintain_project(r, "dl", sys.argv[2])
"""


def test_a_maintainer_killed_between_the_file_and_the_trim_loses_and_duplicates_nothing(
    project, admin, engine, r, tmp_path, redis_url
):
    names = done_entries(admin, engine, 30)
    stream_before = r.xrange(K.log)
    run = subprocess.run(
        [sys.executable, "-c", KILLED_ARCHIVER, redis_url, str(tmp_path)], capture_output=True, timeout=60
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert (tmp_path / P / "log" / "1.jsonl.zst").exists()
    assert r.xrange(K.log) == stream_before and log_archive.registry(r, K) == []
    r.delete(K.maintain_lease)  # as if it expired
    assert maintenance.maintain_project(r, P, tmp_path)["log_archived"] == 20
    rows = export(admin, tmp_path)
    assert [row["items"][0] for row in rows] == names
    assert len({row["entry"] for row in rows}) == 30


def test_the_archive_script_refuses_a_file_that_does_not_continue_the_archive(
    project, admin, engine, r, tmp_path
):
    done_entries(admin, engine, 4)
    ids = [entry_id for entry_id, _ in r.xrange(K.log)]
    held = lease(r)
    r.hset(K.log_segments, "#next", 3)

    def archive(number, first, last, n, holder=held.holder):
        return scripts.log_archive(
            r, K, holder=holder, number=number, first_id=first, last_id=last, entries=n
        )

    before = state(r)
    assert archive(1, ids[1], ids[2], 2) == (0, 0)  # skips ids[0]
    assert archive(1, ids[0], ids[1], 2, "node-b") == (
        scripts.log_archive.codes.NOT_HOLDER,
        0,
    )  # not the lease holder
    assert archive(4, ids[0], ids[1], 2) == (0, 0)  # a number never handed out
    assert state(r) == before
    assert archive(1, ids[0], ids[1], 2) == (scripts.log_archive.codes.REGISTERED, 2)
    assert r.hget(K.log_segments, "#archived") == ids[1]
    assert [i for i, _ in r.xrange(K.log)] == ids[2:]
    assert archive(1, ids[2], ids[2], 1) == (0, 0)  # already registered
    assert archive(2, ids[0], ids[1], 2) == (0, 0)  # behind the archive
    with pytest.raises(scripts.ScriptError):
        archive(2, "later", ids[3], 1)


def test_a_lost_lease_leaves_the_file_unregistered_and_the_entries_in_the_stream(
    project, admin, engine, r, tmp_path, monkeypatch
):
    done_entries(admin, engine, 15)
    held = lease(r)
    monkeypatch.setattr(log_archive, "_after_write", lambda path: r.set(K.maintain_lease, "node-b"))
    with pytest.raises(log_archive.LogLeaseLost):
        log_archive.archive(r, K, tmp_path, held)
    assert r.xlen(K.log) == 15 and log_archive.registry(r, K) == []


def test_an_export_running_while_maintain_archives_sees_every_entry_once(project, admin, engine, r, tmp_path):
    names = done_entries(admin, engine, 1200)
    reader = log_reader.entries(admin.conn, K, tmp_path)
    seen = [next(reader)[1]["items"][0] for _ in range(300)]
    # Meanwhile the oldest 1,190 go to disk, those the reader has and those it has not.
    assert maintenance.maintain_project(r, P, tmp_path)["log_archived"] == 1190
    seen += [rec["items"][0] for _, rec in reader]
    assert seen == names


# -- the stream's safety bound ------------------------------------------------------------------


def test_the_safety_bound_cuts_only_far_beyond_the_watermark_and_counts_what_it_drops(
    project, admin, engine, r
):
    # log_maxlen 10: the bound is max(10 x 10, 100,000) entries.
    pipe = r.pipeline(transaction=False)
    for n in range(99_999):
        pipe.xadd(K.log, {"downloader": "old", "items": f"old{n}", "at": 1})
    pipe.execute()
    finish(admin, engine, [url(1)])
    assert r.xlen(K.log) == 100_000 and r.hget(K.stats, "log_entries_dropped") is None
    oldest = r.xrange(K.log, count=2)
    finish(admin, engine, [url(2)])
    assert r.xlen(K.log) == 100_000 and r.hget(K.stats, "log_entries_dropped") == "1"
    assert r.xrange(K.log, count=1) == oldest[1:]
    assert log_archive.status(r, K)["dropped_entries"] == 1


# -- export: filters, kinds, names --------------------------------------------------------------


def test_export_filters_by_time_and_downloader(project, admin, engine, r, tmp_path):
    early = done_entries(admin, engine, 8, "alice")
    time.sleep(0.01)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.01)
    late_bob = done_entries(admin, engine, 7, "bob-warrior")
    late_alice = finish(admin, engine, [url(next(SERIAL))], "alice")
    maintenance.maintain_project(r, P, tmp_path)  # 6 archived: filters cross both parts
    assert log_archive.registry(r, K)
    items = lambda rows: [row["items"][0] for row in rows]  # noqa: E731
    assert items(export(admin, tmp_path)) == early + late_bob + late_alice
    assert items(export(admin, tmp_path, since_ms=cut_ms)) == late_bob + late_alice
    assert items(export(admin, tmp_path, downloader="alice")) == early + late_alice
    assert items(export(admin, tmp_path, since_ms=cut_ms, downloader="alice")) == late_alice
    assert export(admin, tmp_path, since_ms=int(time.time() * 1000) + 60_000) == []


@pytest.mark.parametrize(
    "text,ms",
    [
        ("1700000000", 1_700_000_000_000),
        ("1700000000.5", 1_700_000_000_500),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000_000),
        ("2023-11-14", 1_699_920_000_000),
    ],
)
def test_since_takes_unix_seconds_or_iso_times(text, ms):
    assert log_archive.parse_since(text) == ms


@pytest.mark.parametrize("text", ["yesterday", "", "-5", "1e9", "2023-13-01"])
def test_a_bad_since_is_refused(text):
    with pytest.raises(log_archive.LogError):
        log_archive.parse_since(text)


def test_url_names_of_kilobytes_and_non_ascii_names_round_trip(project, admin, engine, r, tmp_path):
    names = [
        url(1, 4096),
        "https://e.com/p?a=1&b=%20#x y/z",
        "ünï/cødé ☃ 日本語?q=%E2%98%83",
        "https://example.org/" + "é" * 2000,
        'a\\b"c\td',
    ]
    calls = [finish(admin, engine, names[:2]), finish(admin, engine, names[2:])]
    project_verbs.set_settings(admin, P, {"log_maxlen": "0"})
    maintenance.maintain_project(r, P, tmp_path)
    assert r.xlen(K.log) == 0
    assert [row["items"] for row in export(admin, tmp_path)] == calls
    assert sorted(calls[0] + calls[1]) == sorted(names)


def test_a_done_of_the_largest_batch_of_the_longest_names_is_archived_whole(
    project, admin, engine, r, tmp_path
):
    names = finish(admin, engine, [url(n, 4096) for n in range(1000)])
    assert log_archive.archive(r, K, tmp_path, lease(r), keep=0) == 1
    assert export(admin, tmp_path)[0]["items"] == names


def test_uploads_and_bad_dones_export_the_same_way(project, admin, engine, r, tmp_path):
    engine.uploaded(P, "alice", url(1), "rsync://up/x/")
    engine.uploaded(P, "bob-warrior", url(2), "")
    engine.done(P, "mallory", "", [url(3)], [], "")
    uploads = export(admin, tmp_path, kind="uploads")
    assert [(u["uploader"], u["item"], u["server"]) for u in uploads] == [
        ("alice", url(1), "rsync://up/x/"),
        ("bob-warrior", url(2), ""),
    ]
    assert [u["item"] for u in export(admin, tmp_path, kind="uploads", downloader="bob-warrior")] == [url(2)]
    bad = export(admin, tmp_path, kind="bad_dones")
    assert [(b["downloader"], b["reason"], b["count"], b["items"]) for b in bad] == [
        ("mallory", "unknown", 1, [url(3)])
    ]
    with pytest.raises(log_archive.LogError):
        export(admin, tmp_path, kind="claims")


def test_a_missing_segment_file_is_an_error_not_a_silent_gap(project, admin, engine, r, tmp_path):
    done_entries(admin, engine, 12)
    maintenance.maintain_project(r, P, tmp_path)
    with pytest.raises(log_archive.LogUnreadable, match="not in"):
        export(admin, tmp_path / "elsewhere")


# -- the CLI and the admin API ------------------------------------------------------------------


def test_tracker_log_export_streams_json_lines(project, admin, engine, r, tmp_path, redis_url):
    names = done_entries(admin, engine, 14)
    maintenance.maintain_project(r, P, tmp_path)
    runner = CliRunner()
    base = ["--redis-url", redis_url, "log", "export", P, "--segments-dir", str(tmp_path)]
    res = runner.invoke(main, base)
    assert res.exit_code == 0, res.output
    assert [json.loads(line)["items"][0] for line in res.output.splitlines()] == names
    res = runner.invoke(main, base + ["--downloader", "nobody"])
    assert res.exit_code == 0 and res.output == ""
    res = runner.invoke(main, base + ["--since", "soon"])
    assert res.exit_code == 1 and "bad time" in res.output
    res = runner.invoke(main, ["--redis-url", redis_url, "log", "status", P, "--json"])
    assert json.loads(res.output) == {
        "segments": 1,
        "archived_entries": 4,
        "stream_entries": 10,
        "archived_up_to": log_archive.registry(r, K)[0][2],
        "dropped_entries": 0,
    }


def test_the_admin_api_pages_through_the_log(project, admin, engine, r, tmp_path):
    names = done_entries(admin, engine, 25)
    maintenance.maintain_project(r, P, tmp_path)
    web = testing.TestClient(create_app(engine, config=AppConfig(segments_dir=tmp_path)))
    token = tokens.create(admin.conn, P)[0]
    headers = {"Authorization": f"Bearer {token}"}
    got, cursor, pages = [], None, 0
    while True:
        query = "limit=7" + (f"&cursor={cursor}" if cursor else "")
        res = web.simulate_get(f"/api/admin/projects/{P}/log", query_string=query, headers=headers)
        assert res.status_code == 200, res.text
        got += [e["items"][0] for e in res.json["entries"]]
        cursor, pages = res.json["cursor"], pages + 1
        if cursor is None:
            break
    assert got == names and pages == 4
    res = web.simulate_get(f"/api/admin/projects/{P}/log", headers=headers, query_string="downloader=nobody")
    assert res.json == {"entries": [], "cursor": None}
    for query in ("kind=claims", "cursor=abc", "since=soon", "limit=0", "limit=1001"):
        res = web.simulate_get(f"/api/admin/projects/{P}/log", query_string=query, headers=headers)
        assert res.status_code == 400 and res.text.count("\n") == 1, (query, res.text)
    elsewhere = AppConfig(segments_dir=tmp_path / "elsewhere")  # a node that does not see the files
    web = testing.TestClient(create_app(engine, config=elsewhere))
    res = web.simulate_get(f"/api/admin/projects/{P}/log", headers=headers)
    assert res.status_code == 503 and "not in" in res.text


def test_a_page_stops_after_scanning_its_bound_with_a_cursor_to_go_on(project, admin, engine, r, tmp_path):
    done_entries(admin, engine, 30)
    page = log_reader.page(r, K, tmp_path, downloader="nobody", max_scan=12)
    assert page["entries"] == [] and page["cursor"] == r.xrange(K.log)[11][0]
    page = log_reader.page(r, K, tmp_path, downloader="nobody", cursor=page["cursor"])
    assert page == {"entries": [], "cursor": None}


def test_a_done_over_http_logs_the_senders_ip_and_every_field(project, admin, engine, r, tmp_path):
    names = [url(1, 2048), "ünï/cødé ☃ 日本語?q=%E2%98%83 #x"]
    item_verbs.add(admin, P, names)
    web = testing.TestClient(create_app(engine))
    got = (
        web.simulate_post(
            f"/{P}/multi=2/request",
            remote_addr="198.51.100.7",
            json={"downloader": "alice", "api_version": "2"},
        )
        .json["item_name"]
        .split("\0")
    )
    res = web.simulate_post(
        f"/{P}/done",
        remote_addr="198.51.100.8",
        json={
            "downloader": "alice",
            "version": "20240101.01",
            "item": "\0".join(got),
            "bytes": {"example.com": 3000, "cdn.example.com": 1000},
            "id": {"sha1": "ab"},
        },
    )
    assert res.status_code == 200, res.text
    maintenance.maintain_project(r, P, tmp_path)
    project_verbs.set_settings(admin, P, {"log_maxlen": "0"})
    maintenance.maintain_project(r, P, tmp_path)
    [row] = export(admin, tmp_path)
    assert row["ip"] == "198.51.100.8" and row["items"] == got and sorted(got) == sorted(names)
    assert (row["downloader"], row["version"], row["bytes"], row["domains"], row["id"]) == (
        "alice",
        "20240101.01",
        4000,
        {"example.com": 3000, "cdn.example.com": 1000},
        {"sha1": "ab"},
    )
