"""The runbook's backup and restore (packaging/backup/): a project with items queued, claimed,
done and offloaded to segment files is backed up, changed, wiped and restored; Redis starts from
the restored append-only file and every item is where it was at the backup."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from support.census import places
from support.paths import TRACKER_BIN
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

REPO = Path(__file__).resolve().parents[2]
BACKUP = REPO / "packaging" / "backup" / "tracker-backup"
RESTORE = REPO / "packaging" / "backup" / "tracker-restore"
PROJECT = "backup-me"
NAMES = [f"https://example.com/a b/{i}?q=%25&x=#frag" for i in range(600)] + [
    "https://example.com/" + "long/" * 400 + "end"
]


def tracker(redis_url: str, *args: str) -> str:
    result = subprocess.run(
        [TRACKER_BIN, "--redis-url", redis_url, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def files_digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def state(redis_url: str, segments: Path) -> dict:
    """Where every item is (Redis), the project's counts (`tracker status`) and the segment files."""
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    return {
        "places": places(r, ProjectKeys(PROJECT)),
        "status": json.loads(tracker(redis_url, "--json", "status", PROJECT)),
        "files": files_digest(segments),
    }


@pytest.fixture
def embedded(tmp_path):
    if not shutil.which("redis-cli"):
        pytest.skip("redis-cli not installed (Debian package redis-tools)")
    server = EmbeddedRedis(tmp_path / "data", port=free_port())
    server.start()
    yield server
    server.stop()


def test_backup_then_restore_brings_back_every_item_and_segment(embedded, tmp_path):
    segments = tmp_path / "segments"
    ctx = AdminContext.from_url(embedded.url)
    project_verbs.create(
        ctx, PROJECT, {"offload_high": "200", "offload_low": "100", "offload_segment_items": "50"}
    )
    item_verbs.add(ctx, PROJECT, NAMES)
    tracker(embedded.url, "maintain", "--once", "--segments-dir", str(segments))
    engine = Engine(embedded.url)
    _, claimed = engine.claim(PROJECT, "backup-warrior", "192.0.2.7", 5)
    assert len(claimed) == 5
    before = state(embedded.url, segments)
    assert before["files"], "nothing was offloaded: the test would not cover segments"
    assert before["places"]["https://example.com/" + "long/" * 400 + "end"] <= 1

    subprocess.run([BACKUP, tmp_path / "backup", segments, "-p", str(embedded.port)], check=True, timeout=60)
    # After the backup: more items and a maintenance pass, then the machine is lost.
    item_verbs.add(ctx, PROJECT, [f"https://example.com/after/{i}" for i in range(300)])
    tracker(embedded.url, "maintain", "--once", "--segments-dir", str(segments))
    assert state(embedded.url, segments) != before
    embedded.stop()
    shutil.rmtree(embedded.data_dir)
    shutil.rmtree(segments)

    subprocess.run([RESTORE, tmp_path / "backup", segments, embedded.data_dir], check=True, timeout=60)
    embedded.start()
    assert state(embedded.url, segments) == before
    # Restored with the append-only file on: a write now survives a restart.
    item_verbs.add(AdminContext.from_url(embedded.url), PROJECT, ["https://example.com/after-restore?x=1#y"])
    embedded.stop()
    embedded.start()
    assert (
        places(redis.Redis.from_url(embedded.url, decode_responses=True), ProjectKeys(PROJECT))[
            "https://example.com/after-restore?x=1#y"
        ]
        == 1
    )


def test_backup_refuses_to_overwrite_an_earlier_one(tmp_path):
    (tmp_path / "backup").mkdir()
    result = subprocess.run(
        [BACKUP, tmp_path / "backup", tmp_path / "segments", "-p", "1"], capture_output=True, text=True
    )
    assert result.returncode == 1 and "exists" in result.stderr
