"""End to end with the real warrior client: seesaw-kit 0.10.3's own tasks against the live server.

Each test runs tests/support/warrior_driver.py (GetItemFromTracker, a stand-in download,
PrepareStatsForTracker, optionally UploadWithTracker, SendDoneToTracker) in a subprocess against
`tracker serve` with bjoern workers and a real Redis, then checks the tracker's state: every item
done exactly once, none out, none left, counters equal to the truth.
"""

from __future__ import annotations

import http.server
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from support.processes import start, stop, wait_for_port
from support.seesaw_runner import finish_warrior, run_warrior, start_warrior
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.infra.embedded import free_port
from tracker_core.keyspace import ProjectKeys

pytestmark = pytest.mark.slow

P = "seesawtest"


def assert_all_done(admin, r, names, downloaders):
    """Every name done exactly once, nothing out or queued, counters equal to the truth."""
    k = ProjectKeys(P)
    status = census_verbs.status(admin, P)
    assert status["todo_total"] == 0
    assert status["out"] == 0
    assert r.zcard(k.out) == 0 and r.hlen(k.claims) == 0
    assert r.smembers(k.done) == set(names)
    assert status["done"] == len(names)
    counts = {d: int(c) for d, c in r.hgetall(k.downloader_count).items()}
    assert counts == downloaders


def project_with_items(admin, count, **settings):
    project_verbs.create(admin, P, settings)
    names = [f"item-{i:04d}" for i in range(count)]
    assert item_verbs.add(admin, P, names)["added"] == count
    return names


def test_single_items_complete_through_the_real_client(admin, r, live_server, tmp_path):
    names = project_with_items(admin, 6)
    result, log = run_warrior(live_server, tmp_path, project=P, claims=6)
    assert sorted(result["names"]) == names and result["failed"] == []
    assert log.count("Tracker confirmed item") == 6
    assert_all_done(admin, r, names, {"e2e-warrior": 6})
    k = ProjectKeys(P)
    # PrepareStatsForTracker sent the data file's real size under the "data" domain.
    expected_bytes = sum(len(f"{name}\n") for name in names)
    assert int(r.hget(k.domain_bytes, "data")) == expected_bytes
    assert int(float(r.zscore(k.downloader_bytes, "e2e-warrior"))) == expected_bytes
    assert r.hget(k.downloader_version, "e2e-warrior") == "20240101.01"


def test_multi_claims_travel_as_nul_joined_batches(admin, r, live_server, tmp_path):
    names = project_with_items(admin, 20)
    result, log = run_warrior(live_server, tmp_path, project=P, claims=4, multi=5)
    assert result["claims"] == 4
    assert sorted(result["names"]) == names
    # The wire path was BASE/multi=5//request, answered in place (no redirect).
    assert "Received item 'item-" in log
    assert_all_done(admin, r, names, {"e2e-warrior": 20})


def test_concurrent_items_and_two_warriors_share_the_queue(admin, r, live_server, tmp_path):
    names = project_with_items(admin, 60)
    first = start_warrior(
        live_server, tmp_path, project=P, claims=5, multi=3, concurrent=4, downloader="warrior-one"
    )
    second = start_warrior(
        live_server, tmp_path, project=P, claims=15, multi=3, concurrent=3, downloader="warrior-two"
    )
    (one, _), (two, _) = finish_warrior(first), finish_warrior(second)
    assert not set(one["names"]) & set(two["names"])
    assert sorted(one["names"] + two["names"]) == names
    assert_all_done(admin, r, names, {"warrior-one": 15, "warrior-two": 45})


def test_rate_limited_warrior_backs_off_on_429_and_finishes(admin, r, live_server, tmp_path):
    # 120 items per minute with no burst: one claim every 0.5 s, so a second concurrent
    # request is refused with 429 and seesaw retries it.
    names = project_with_items(admin, 5, rate_limit="120", rate_burst="1")
    result, log = run_warrior(live_server, tmp_path, project=P, claims=5, concurrent=3)
    assert sorted(result["names"]) == names
    assert "Tracker rate limiting is active" in log
    assert int(r.hget(ProjectKeys(P).stats, "requests_limited")) >= 1
    assert_all_done(admin, r, names, {"e2e-warrior": 5})


def test_outdated_warrior_gets_455_until_the_minimum_version_allows_it(admin, r, live_server, tmp_path):
    names = project_with_items(admin, 3, min_version="20240101.02")
    warrior = start_warrior(live_server, tmp_path, project=P, claims=3, version="20240101.01")
    k = ProjectKeys(P)
    deadline = time.monotonic() + 30
    while not int(r.hget(k.stats, "requests_outdated") or 0):
        assert time.monotonic() < deadline, "the outdated warrior was never refused"
        time.sleep(0.1)
    assert census_verbs.status(admin, P)["out"] == 0  # refused requests claimed nothing
    project_verbs.set_settings(admin, P, {"min_version": "20240101.01"})
    result, log = finish_warrior(warrior)
    assert "Project code is out of date" in log
    assert sorted(result["names"]) == names
    assert_all_done(admin, r, names, {"e2e-warrior": 3})


class PutReceiver(http.server.BaseHTTPRequestHandler):
    """An HTTP upload target: stores what curl --upload-file PUTs under the server's directory."""

    def do_PUT(self):
        length = int(self.headers["Content-Length"])
        target = Path(self.server.directory) / Path(self.path).name
        target.write_bytes(self.rfile.read(length))
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_target(tmp_path):
    received = tmp_path / "received-http"
    received.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PutReceiver)
    server.directory = str(received)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/:downloader/", received
    server.shutdown()
    server.server_close()


@pytest.fixture
def rsync_target(tmp_path):
    """A real rsync daemon on loopback with one writable module."""
    if shutil.which("rsync") is None:
        pytest.fail("rsync is missing: `make deps` installs it")
    received = tmp_path / "received-rsync"
    received.mkdir()
    port = free_port()
    config = tmp_path / "rsyncd.conf"
    config.write_text(
        f"pid file = {tmp_path / 'rsyncd.pid'}\nuse chroot = false\n"
        f"uid = {os.getuid()}\ngid = {os.getgid()}\n"
        f"[items]\npath = {received}\nread only = false\n"
    )
    daemon = start(
        ["rsync", "--daemon", "--no-detach", f"--config={config}", "--address=127.0.0.1", f"--port={port}"]
    )
    wait_for_port(port, process=daemon)
    yield f"rsync://127.0.0.1:{port}/items/", received
    stop(daemon)


@pytest.mark.parametrize("target_kind", ["http", "rsync"])
def test_upload_with_tracker_sends_data_to_the_announced_target(
    admin, r, live_server, tmp_path, target_kind, request
):
    url, received = request.getfixturevalue(f"{target_kind}_target")
    names = project_with_items(admin, 4)
    project_verbs.set_upload_target(admin, P, url, "active")
    project_verbs.set_upload_target(admin, P, "rsync://192.0.2.1/retired/", "inactive")
    result, log = run_warrior(live_server, tmp_path, project=P, claims=2, multi=2, upload=True)
    assert sorted(result["names"]) == names
    files = sorted(received.rglob("*.txt"))
    assert len(files) == 2, log[-3000:]
    uploaded = sorted(line for f in files for line in f.read_text().splitlines())
    assert uploaded == names
    if target_kind == "http":
        # ":downloader" in the target was replaced by the warrior's name.
        assert {f.parent.name for f in files} == {received.name}
        assert "Upload server: http://127.0.0.1" in log and "/e2e-warrior/" in log
    assert_all_done(admin, r, names, {"e2e-warrior": 4})
