"""`tracker backup` while a real `tracker serve` and `tracker maintain` work (seesaw-kit warriors
claiming and finishing, queue tails offloaded, done items offloaded, the done log archived),
then every process killed (Redis too), its data and the segments wiped, `tracker restore`, and
the census equal to the one at the backup: every item in exactly one place, and claims work."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis

from support import census as census_support
from support.paths import TRACKER_BIN
from support.seesaw_runner import start_warrior
from support.tracker_runs import run_tracker
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


def tracker(url: str, *args) -> subprocess.CompletedProcess:
    return run_tracker("--redis-url", url, *args, check=True, timeout=180)


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

    def kill_all(self, keep_redis: bool = False) -> None:
        for process in [*self.processes, *([] if keep_redis else [self.redis.process])]:
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes = []


def seesaw_warriors(d: Deployment, tmp_path: Path, label: str, count: int, hold_s: float) -> list:
    """COUNT seesaw-kit warriors (the real pipeline: claim multi=10, a download taking HOLD_S,
    done) on D's server, each making claims until it is killed."""
    server = SimpleNamespace(base=f"http://127.0.0.1:{d.port}")
    return [
        start_warrior(
            server,
            tmp_path,
            100_000,
            project=P,
            multi=10,
            concurrent=4,
            downloader=f"bk-{label}-{i}",
            hold_s=hold_s,
            log=tmp_path / f"warrior-{label}-{i}.log",
        )
        for i in range(count)
    ]


def stop_warriors(warriors: list) -> None:
    for warrior in warriors:
        if warrior.poll() is None:
            warrior.kill()
        warrior.wait(timeout=30)


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
    warriors: list = []
    try:
        d.start_tracker()
        r = redis.Redis.from_url(d.url, decode_responses=True)
        assert processes.wait_for(lambda: segment_registry.offloaded_count(r, K) > 0, 30), "nothing offloaded"
        warriors = seesaw_warriors(d, tmp_path, "before", 2, hold_s=0.05)
        assert processes.wait_for(lambda: r.hlen(K.log_segments) > 0 and r.scard(K.done) > 0, 60)

        status = AdminContext(r)
        before = census_verbs.status(status, P)
        result = tracker(d.url, "--json", "backup", backup_dir, "--segments-dir", d.segments)
        after = census_verbs.status(status, P)
        manifest = json.loads(result.stdout)
        at_backup = manifest["census"][P]
        # Warriors claimed and finished while the backup ran (the counters around it moved, the
        # backup's census between them); maintainers take their leases back.
        assert before["counters"]["items_claimed"] < after["counters"]["items_claimed"]
        assert before["done"] < at_backup["done"] or at_backup["done"] < after["done"]
        assert processes.wait_for(
            lambda: (r.get(K.maintain_lease) or "backup:").split(":")[0] != "backup", 10
        )
        assert not r.exists(keyspace.BACKUP_HOLD)
        time.sleep(1.5)  # serving goes on after the backup
        assert census_verbs.status(status, P)["done"] > after["done"]
        r.close()
    finally:
        stop_warriors(warriors)
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
    def finished() -> bool:
        status = census_verbs.status(admin, P)
        return status["todo_total"] == 0 and status["offloaded_queues"]["todo"] == 0

    try:
        d.start_tracker()
        warriors = seesaw_warriors(d, tmp_path, "after", 3, hold_s=0)
        assert processes.wait_for(finished, 120), census_verbs.status(admin, P)
        # Stopped before the places are read: a maintainer offloading done items between the
        # read of the done set and that of the segment files would show an item in both.
        stop_warriors(warriors)
        d.kill_all(keep_redis=True)
        status = census_verbs.status(admin, P)
        assert status["done"] > at_backup["done"]
        assert status["done_kept"] + status["done_offloaded"] + status["out"] == len(NAMES)
        found = where_items_are(d.url, d.segments)
        assert set(found) == set(NAMES) and set(found.values()) == {1}
    finally:
        stop_warriors(warriors)
        d.kill_all()
