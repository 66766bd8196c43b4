"""`tracker backup` while a real `tracker serve` and `tracker maintain` work (warriors claiming
and finishing over HTTP, queue tails offloaded, done items offloaded, the done log archived),
then every process killed (Redis too), its data and the segments wiped, `tracker restore`, and
the census equal to the one at the backup: every item in exactly one place, and claims work."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from support import census as census_support
from support.http_warrior import post_once
from support.paths import TRACKER_BIN
from tracker_core import keyspace
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.donelog import log_archive
from tracker_core.infra import processes
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.offload import segment_registry

pytestmark = pytest.mark.slow

P = "keep-safe"
K = keyspace.ProjectKeys(P)
NAMES = [f"https://example.com/page/{i}?q=a%20b&x=#frag" for i in range(3000)]
SETTINGS = {
    "offload_high": "400",
    "offload_low": "200",
    "offload_segment_items": "100",
    "done_mode": "offload",
    "done_offload_high": "100",
    "log_maxlen": "20",
}


def tracker(url: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRACKER_REDIS_URL"}
    result = subprocess.run(
        [TRACKER_BIN, "--redis-url", url, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert not check or result.returncode == 0, result.stderr
    return result


class Deployment:
    """A Redis of its own (killed with SIGKILL, like every process here), `tracker serve` and
    `tracker maintain` on it."""

    def __init__(self, root: Path):
        self.root = root
        self.segments = root / "segments"
        self.redis = EmbeddedRedis(root / "redis", port=free_port())
        self.processes: list = []
        self.port = 0

    @property
    def url(self) -> str:
        return self.redis.url

    def start_redis(self) -> None:
        self.redis.start()

    def start_tracker(self) -> None:
        env = dict(os.environ, TRACKER_REDIS_URL=self.url)
        self.port = free_port()
        self.processes = [
            processes.start(
                [
                    TRACKER_BIN,
                    "--data-dir",
                    self.root,
                    "maintain",
                    "--segments-dir",
                    self.segments,
                    "--interval",
                    "0.2",
                ],
                env=env,
                output=self.root / "maintain.log",
            ),
            processes.start(
                [TRACKER_BIN, "--data-dir", self.root, "serve", "--port", str(self.port), "--workers", "2"],
                env=env,
                output=self.root / "serve.log",
            ),
        ]
        processes.wait_for_port(self.port, self.processes[1])

    def kill_all(self) -> None:
        for process in [*self.processes, self.redis.process]:
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes = []


class Warriors:
    """Warriors claiming multi=10 over HTTP and reporting 8 of each 10 done (the rest stay out),
    until stopped, or with FINISHED until a 404 finds FINISHED() true (a 404 while the backup
    holds the refills back, or before a refill, is retried); each answer's time and status kept."""

    def __init__(self, port: int, threads: int = 2, finished=None):
        self.port = port
        self.finished = finished
        self.answers: list[tuple[float, str, int]] = []
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(f"bk-warrior-{i}",)) for i in range(threads)]

    def start(self) -> Warriors:
        for thread in self.threads:
            thread.start()
        return self

    def run(self, downloader: str) -> None:
        body = {"downloader": downloader, "api_version": "2", "version": "1"}
        while not self.stopped.is_set():
            status, reply = post_once(self.port, f"/{P}/multi=10/request", body)
            self.answers.append((time.monotonic(), "request", status))
            if status == 404 and self.finished is not None and self.finished():
                return
            if status != 200:
                time.sleep(0.05)
                continue
            items = json.loads(reply)["item_name"].split("\0")[:8]
            done = {"downloader": downloader, "version": "1", "item": "\0".join(items), "bytes": {"d": 1}}
            status, _ = post_once(self.port, f"/{P}/done", done)
            self.answers.append((time.monotonic(), "done", status))
            time.sleep(0.02)

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=30)

    def ok_between(self, start: float, end: float, kind: str) -> int:
        return sum(
            1 for at, what, status in self.answers if start <= at <= end and what == kind and status == 200
        )


def where_items_are(url: str, segments: Path) -> Counter:
    r = redis.Redis.from_url(url, decode_responses=True, encoding_errors="surrogateescape")
    try:
        return census_support.places_with_segments(r, K, segments)
    finally:
        r.close()


def test_backup_while_serving_then_restore_after_losing_everything(tmp_path):
    d = Deployment(tmp_path / "node")
    d.start_redis()
    admin = AdminContext.from_url(d.url)
    project_verbs.create(admin, P, SETTINGS)
    item_verbs.add(admin, P, NAMES)
    admin.conn.close()
    backup_dir = tmp_path / "backups" / "nightly"
    backup_dir.parent.mkdir()
    warriors = None
    try:
        d.start_tracker()
        r = redis.Redis.from_url(d.url, decode_responses=True)
        assert processes.wait_for(lambda: segment_registry.offloaded_count(r, K) > 0, 30), "nothing offloaded"
        warriors = Warriors(d.port).start()
        assert processes.wait_for(lambda: r.hlen(K.log_segments) > 0 and r.scard(K.done) > 0, 60)

        started = time.monotonic()
        result = tracker(d.url, "--json", "backup", backup_dir, "--segments-dir", d.segments)
        ended = time.monotonic()
        manifest = json.loads(result.stdout)
        at_backup = manifest["census"][P]
        # Warriors claimed and finished while the backup ran; maintainers take their leases back.
        assert warriors.ok_between(started, ended, "request") > 0
        assert warriors.ok_between(started, ended, "done") > 0
        assert processes.wait_for(
            lambda: (r.get(K.maintain_lease) or "backup:").split(":")[0] != "backup", 10
        )
        assert not r.exists(keyspace.BACKUP_HOLD)
        time.sleep(1.5)  # serving goes on after the backup
        assert warriors.ok_between(ended, time.monotonic(), "done") > 0
        r.close()
    finally:
        if warriors is not None:
            warriors.stop()
        d.kill_all()

    # The backup: whole, with segments of queues and of done and archived done log files.
    assert not (backup_dir.parent / "nightly.partial").exists()
    assert json.loads((backup_dir / "manifest.json").read_text())["census"][P] == at_backup
    assert at_backup["offloaded_queues"]["todo"] > 0 and at_backup["done_offloaded"] > 0
    assert at_backup["out"] > 0 and at_backup["done_kept"] > 0 and at_backup["queues"]["todo"] > 0
    assert any("/log/" in name for name in manifest["files"])

    shutil.rmtree(d.redis.data_dir)
    shutil.rmtree(d.segments)
    d.start_redis()
    restored = tracker(d.url, "restore", backup_dir, "--segments-dir", d.segments)
    assert "the census equals the backup's" in restored.stdout, restored.stdout
    admin = AdminContext.from_url(d.url)
    assert census_verbs.status(admin, P) == at_backup
    found = where_items_are(d.url, d.segments)
    assert set(found) == set(NAMES) and set(found.values()) == {1}
    # The archived done log came back whole: its registered files are there.
    for number, *_ in log_archive.registry(admin.conn, K):
        assert log_archive.segment_path(d.segments, P, number).is_file()

    # Started again: claims work, and every item not out at the backup gets done.
    try:
        d.start_tracker()

        def finished() -> bool:
            status = census_verbs.status(admin, P)
            return status["todo_total"] == 0 and status["offloaded_queues"]["todo"] == 0

        warriors = Warriors(d.port, threads=3, finished=finished).start()
        for thread in warriors.threads:
            thread.join(timeout=120)
        assert warriors.ok_between(0, time.monotonic(), "request") > 0
        status = census_verbs.status(admin, P)
        assert status["todo_total"] == 0 and status["offloaded_queues"]["todo"] == 0
        assert status["done_kept"] + status["done_offloaded"] + status["out"] == len(NAMES)
        found = where_items_are(d.url, d.segments)
        assert set(found) == set(NAMES) and set(found.values()) == {1}
    finally:
        warriors.stop()
        d.kill_all()
