"""The backup hold (tracker_core.backup.hold): maintainers give their offload leases to a
backup and take them back after it; while a backup holds them no pass or refill moves a
segment, so the snapshot's registry and the copied files agree."""

from __future__ import annotations

import threading

import pytest
import redis

from support.census import places_with_segments
from support.projects import new_project
from tracker_core import keyspace
from tracker_core.backup import restoring, snapshot, taking
from tracker_core.backup.hold import BackupError, BackupHold
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import segment_registry

P = "held-for-backup"
K = ProjectKeys(P)
NAMES = [f"https://example.com/held/{i}?x=1" for i in range(1000)]
SMALL = {"offload_high": "200", "offload_low": "100", "offload_segment_items": "100"}


def test_a_maintainer_gives_its_lease_to_a_backup_and_takes_it_back(admin, r, redis_url, tmp_path):
    new_project(admin, P, NAMES, SMALL)
    m = maintenance.Maintainer(r, tmp_path / "segments", holder="node-1")
    assert "lease" not in m.pass_once()[P] and r.get(K.maintain_lease) == "node-1"
    hold = BackupHold(r, wait_s=10).start()
    taker = threading.Thread(target=hold.take, args=([K],))
    taker.start()
    assert m.pass_once()[P] == {"lease": "held elsewhere"}  # given up at the pass's take
    taker.join(timeout=15)
    assert r.get(K.maintain_lease) == hold.holder and 0 < r.pttl(K.maintain_lease) <= hold.hold_ms
    Engine(redis_url).claim(P, "bk-warrior", "192.0.2.1", 150)  # todo 50: a refill is due
    registry = segment_registry.registry(r, K)
    assert m.pass_once()[P] == {"lease": "held elsewhere"}
    assert m.refill_now(P) is None
    assert segment_registry.registry(r, K) == registry  # a refill was due, none ran
    hold.release()
    assert not r.exists(keyspace.BACKUP_HOLD) and not r.exists(K.maintain_lease)
    assert m.pass_once()[P].get("refilled") and r.get(K.maintain_lease) == "node-1"


def test_a_lease_holder_that_ignores_the_hold_stops_the_backup_in_one_line(r):
    r.set(K.maintain_lease, "node-of-an-older-release", px=60_000)
    hold = BackupHold(r, wait_s=0.3).start()
    with pytest.raises(
        BackupError, match=r"lease of held-for-backup .* still held by node-of-an-older-release"
    ):
        hold.take([K])
    hold.release()
    assert not r.exists(keyspace.BACKUP_HOLD) and r.get(K.maintain_lease) == "node-of-an-older-release"


def test_a_lease_lost_during_the_backup_is_found_by_check(r):
    hold = BackupHold(r).start()
    hold.take([K])
    hold.check()
    r.set(K.maintain_lease, "node-1", px=30_000)  # as if it had expired and been taken
    with pytest.raises(BackupError, match=r"lease of \{held-for-backup\} was lost during the backup"):
        hold.check()
    hold.release()
    assert r.get(K.maintain_lease) == "node-1" and not r.exists(keyspace.BACKUP_HOLD)


def test_one_backup_at_a_time(r):
    first = BackupHold(r).start()
    with pytest.raises(BackupError, match="another backup is running"):
        BackupHold(r).start()
    first.release()
    BackupHold(r).start().release()


def test_a_pass_between_the_snapshot_and_the_file_copy_moves_nothing(
    admin, r, redis_url, tmp_path, monkeypatch
):
    """A maintainer pass due (a queue under offload_low) that tries to run while the backup
    copies files: refused for want of the lease, so the copy holds exactly the snapshot's
    segments and the restore puts every item in one place."""
    segments = tmp_path / "segments"
    new_project(admin, P, NAMES, SMALL)
    maintenance.maintain_project(r, P, segments)
    Engine(redis_url).claim(P, "bk-warrior", "192.0.2.1", 150)  # todo 50: a refill is due
    copy = taking.copy_segments
    tried = []

    def pass_then_copy(source, target):
        tried.append(maintenance.maintain_project(r, P, segments))
        return copy(source, target)

    monkeypatch.setattr(taking, "copy_segments", pass_then_copy)
    manifest = taking.backup(redis_url, segments, tmp_path / "backup", {"version": "test"})
    assert tried == [None]  # the backup held the lease
    assert maintenance.maintain_project(r, P, segments)["refilled"] > 0  # it had work to do
    with EmbeddedRedis(tmp_path / "restored", port=free_port()) as target:
        result = restoring.restore(tmp_path / "backup", target.url, tmp_path / "restored-segments")
        assert result["differences"] == [] and result["census"] == manifest["census"]
        restored = redis.Redis.from_url(target.url, decode_responses=True)
        found = places_with_segments(restored, K, tmp_path / "restored-segments")
        assert set(found) == set(NAMES) and set(found.values()) == {1}
        # The backup's own hold and leases stay behind: a maintainer takes the lease at once.
        assert not restored.exists(keyspace.BACKUP_HOLD) and not restored.exists(K.maintain_lease)


def test_a_project_created_during_the_snapshot_has_its_lease_taken_and_is_snapshotted_again(
    admin, redis_url, tmp_path, monkeypatch
):
    new_project(admin, P, NAMES[:300], SMALL)
    stream, take = snapshot.stream_rdb, BackupHold.take
    streamed, taken = [], []

    def create_then_stream(client, path, *args, **kwargs):
        if not streamed:  # between the listing of projects and the first snapshot
            new_project(admin, "born-mid-backup", NAMES[300:400], SMALL)
        streamed.append(path.name)
        return stream(client, path, *args, **kwargs)

    def recorded_take(self, shards):
        tags = take(self, shards)
        taken.append(tags)
        return tags

    monkeypatch.setattr(snapshot, "stream_rdb", create_then_stream)
    monkeypatch.setattr(BackupHold, "take", recorded_take)
    manifest = taking.backup(redis_url, tmp_path / "segments", tmp_path / "backup", {"version": "test"})
    assert taken == [[K.tag], ["{born-mid-backup}"]] and streamed == ["0.rdb", "0.rdb"]
    assert manifest["census"]["born-mid-backup"]["todo_total"] == 100
