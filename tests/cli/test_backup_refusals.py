"""`tracker backup` and `tracker restore` refusals: each one line on stderr, exit 1, nothing
changed; and a restore into the embedded Redis of a data directory (`tracker run`'s)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from support.projects import new_project
from support.tracker_runs import CLEAN_ENV, run_tracker
from tracker_core import keyspace
from tracker_core.admin import census_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port

P = "refusals"
NAMES = [f"https://example.com/refused/{i}?q=%25" for i in range(500)]
SMALL = {"offload_high": "200", "offload_low": "100", "offload_segment_items": "50"}


def tracker(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_tracker(*args, timeout=120, env=env)


def refused(result: subprocess.CompletedProcess, reason: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and reason in last, result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def backup(tmp_path_factory):
    """A backup of a project with items queued, offloaded and out; its directory and census."""
    root = tmp_path_factory.mktemp("backup")
    with EmbeddedRedis(root / "source", port=free_port()) as source:
        admin = AdminContext.from_url(source.url)
        new_project(admin, P, NAMES, SMALL)
        assert (
            tracker(
                "--redis-url", source.url, "maintain", "--once", "--segments-dir", root / "segments"
            ).returncode
            == 0
        )
        result = tracker(
            "--redis-url", source.url, "--json", "backup", root / "b", "--segments-dir", root / "segments"
        )
        assert result.returncode == 0, result.stderr
        admin.conn.close()
    return root / "b", json.loads(result.stdout)["census"]


@pytest.fixture
def target(tmp_path):
    with EmbeddedRedis(tmp_path / "target", port=free_port()) as server:
        yield server


def test_restore_refuses_a_redis_that_holds_keys(backup, target, tmp_path):
    r = redis.Redis.from_url(target.url)
    r.set("someone:else", "1")
    r.close()
    refused(
        tracker("--redis-url", target.url, "restore", backup[0], "--segments-dir", tmp_path / "s"),
        "holds 1 keys",
    )
    assert redis.Redis.from_url(target.url).dbsize() == 1 and not (tmp_path / "s").exists()


def test_restore_refuses_a_redis_with_clients_unless_forced(backup, target, tmp_path):
    watcher = redis.Redis.from_url(target.url)
    watcher.ping()
    args = ("--redis-url", target.url, "restore", backup[0], "--segments-dir", tmp_path / "s")
    refused(tracker(*args), "has 1 other clients (a tracker still running?)")
    assert watcher.dbsize() == 0
    forced = tracker(*args, "--force")
    assert forced.returncode == 0 and "the census equals the backup's" in forced.stdout, forced.stderr
    # Forced again over itself (a restore cut short, finished): the same census.
    assert tracker(*args, "--force").returncode == 0
    assert census_verbs.status(AdminContext.from_url(target.url), P) == backup[1][P]


def test_restore_refuses_a_segments_directory_with_files(backup, target, tmp_path):
    (tmp_path / "s" / P).mkdir(parents=True)
    (tmp_path / "s" / P / "1.zst").write_bytes(b"old")
    refused(
        tracker("--redis-url", target.url, "restore", backup[0], "--segments-dir", tmp_path / "s"),
        "holds files",
    )


def test_restore_refuses_a_changed_missing_or_extra_file(backup, target, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(backup[0], copy)
    segment = next((copy / "segments" / P).glob("*.zst"))
    data = bytearray(segment.read_bytes())
    data[-1] ^= 1
    segment.write_bytes(bytes(data))
    args = ("--redis-url", target.url, "restore", copy, "--segments-dir", tmp_path / "s")
    refused(tracker(*args), f"segments/{P}/{segment.name} does not match its checksum")
    segment.unlink()
    refused(tracker(*args), "1 files of the backup are missing")
    shutil.copy(backup[0] / "segments" / P / segment.name, segment)
    (copy / "segments" / "stray.zst").write_bytes(b"")
    refused(tracker(*args), "1 files are not in the manifest, e.g. segments/stray.zst")
    assert redis.Redis.from_url(target.url).dbsize() == 0 and not (tmp_path / "s").exists()


def test_restore_refuses_an_unfinished_backup(backup, target, tmp_path):
    partial = tmp_path / "nightly.partial"
    shutil.copytree(backup[0], partial)
    (partial / "manifest.json").unlink()  # cut short before its manifest, as a crash leaves it
    refused(tracker("--redis-url", target.url, "restore", partial), "is an unfinished backup")
    refused(
        tracker("--redis-url", target.url, "restore", tmp_path / "nightly"),
        f"no backup at {tmp_path / 'nightly'} ({partial} is an unfinished one)",
    )


def test_backup_refuses_an_existing_directory_and_a_lease_it_cannot_take(tmp_path):
    with EmbeddedRedis(tmp_path / "source", port=free_port()) as source:
        new_project(AdminContext.from_url(source.url), P, NAMES, SMALL)
        (tmp_path / "taken").mkdir()
        base = ("--redis-url", source.url, "backup")
        refused(tracker(*base, tmp_path / "taken"), "exists: give a new directory")
        (tmp_path / "a-file").write_text("")
        refused(tracker(*base, tmp_path / "a-file" / "b"), "File exists")
        r = redis.Redis.from_url(source.url, decode_responses=True)
        r.set(keyspace.ProjectKeys(P).maintain_lease, "node-of-an-older-release", px=60_000)
        (tmp_path / "tmp").mkdir()
        refused(
            tracker(
                *base,
                tmp_path / "b",
                "--lease-wait",
                "0.5",
                env=dict(CLEAN_ENV, TMPDIR=str(tmp_path / "tmp")),
            ),
            f"the offload lease of {P} ({{{P}}}) is still held by node-of-an-older-release after 0.5s",
        )
        assert not (tmp_path / "b").exists() and not (tmp_path / "b.partial").exists()
        assert not r.exists(keyspace.BACKUP_HOLD)
        assert list((tmp_path / "tmp").iterdir()) == []  # its private server's folder is gone


def test_restore_into_and_backup_of_the_embedded_redis_of_a_data_directory(backup, tmp_path):
    data = tmp_path / "var"
    result = tracker("--data-dir", data, "restore", backup[0])
    assert result.returncode == 0 and "the census equals the backup's" in result.stdout, result.stderr
    assert sorted(p.name for p in (data / "segments" / P).iterdir()) == sorted(
        p.name for p in (backup[0] / "segments" / P).iterdir()
    )
    with EmbeddedRedis(data / "redis") as embedded:  # as `tracker run` starts it: from its AOF
        assert census_verbs.status(AdminContext.from_url(embedded.url), P) == backup[1][P]
        refused(tracker("--data-dir", data, "restore", backup[0]), "is running: stop `tracker run` first")
        # And backed up again through it, as beside a running `tracker run`.
        again = tracker("--data-dir", data, "--json", "backup", tmp_path / "again")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["census"] == backup[1]


def test_a_restore_census_that_differs_exits_1(backup, target, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(backup[0], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["census"][P]["out"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    result = tracker("--redis-url", target.url, "restore", copy, "--segments-dir", tmp_path / "s")
    assert result.returncode == 1 and f"{P}.out: {backup[1][P]['out'] + 1} at the backup, " in result.stdout


def test_backup_dir_is_whole(backup):
    directory, _ = backup
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["format"] == "tracker-backup 1" and manifest["redis"]["nodes"][0]["file"] == "redis/0.rdb"
    assert {"version", "commit"} <= set(manifest["tracker"])
    listed = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()} - {"manifest.json"}
    assert listed == set(manifest["files"]) and any(name.startswith(f"segments/{P}/") for name in listed)
    assert not Path(str(directory) + ".partial").exists()
