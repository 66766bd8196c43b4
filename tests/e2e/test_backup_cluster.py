"""Backups of the other topologies: a sharded project on a 3-primary Redis Cluster while
`tracker maintain` runs (one lease per shard, files under SEGMENTS_DIR/P.I/), restored into a
new cluster (every primary's snapshot comes back, each key on the primary that owns its slot
there, the census and every item's place those of the backup); and a Sentinel group's primary."""

from __future__ import annotations

import json
import subprocess

import pytest
import redis

from chaos import census
from support.paths import TRACKER_BIN
from support.redis_topologies import Cluster, SentinelGroup
from support.tracker_runs import CLEAN_ENV, run_tracker
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra import processes
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.offload import segment_file

pytestmark = pytest.mark.slow

P = "sharded-keep"
NAMES = [f"https://shard.example.com/a b/{i}?x=%2F{i}" for i in range(1500)]
SMALL = {"offload_high": "200", "offload_low": "100", "offload_segment_items": "50"}


def tracker(url, *args) -> subprocess.CompletedProcess:
    return run_tracker("--redis-url", url, *args, check=True)


def every_item(cluster: Cluster, admin: AdminContext, segments) -> dict[str, int]:
    """Item -> places holding it, over every shard read on its own primary, segment files included."""
    total: dict[str, int] = {}
    for index, k in enumerate(admin.layout(P).keys):
        node = redis.Redis(
            port=cluster.owner_port(k.tag), decode_responses=True, encoding_errors="surrogateescape"
        )
        folder = segment_file.shard_directory(segments, P, index)
        for item, n in census.where(census.places(node, P, folder, k=k)).items():
            total[item] = total.get(item, 0) + n
        node.close()
    return total


def test_a_sharded_project_on_a_cluster_comes_back_whole(tmp_path):
    first = Cluster(tmp_path / "first", primaries=3).start()
    segments = tmp_path / "segments"
    maintain = None
    try:
        admin = AdminContext.from_url(first.url)
        project_verbs.create(admin, P, SMALL, shards=3)
        item_verbs.add(admin, P, NAMES)
        tracker(first.url, "maintain", "--once", "--segments-dir", segments)
        assert all((segments / f"{P}.{i}" / P).is_dir() for i in (1, 2))
        Engine(first.url).claim(P, "bk-warrior", "192.0.2.9", 120)
        maintain = processes.start(
            [TRACKER_BIN, "maintain", "--segments-dir", segments, "--interval", "0.2"],
            env=dict(CLEAN_ENV, TRACKER_REDIS_URL=first.url),
            output=tmp_path / "maintain.log",
        )
        # The maintainer holds every shard's lease: the backup takes them from it.
        assert processes.wait_for(
            lambda: all(admin.conn.exists(k.maintain_lease) for k in admin.layout(P).keys), 10
        )
        manifest = json.loads(
            tracker(first.url, "--json", "backup", tmp_path / "b", "--segments-dir", segments).stdout
        )
        assert len(manifest["redis"]["nodes"]) == 3
        processes.stop(maintain)
        maintain = None
        at_backup = manifest["census"][P]
        admin.conn.close()
    finally:
        if maintain is not None:
            processes.stop(maintain)
        first.stop()
    second = Cluster(tmp_path / "second", primaries=3).start()
    try:
        restored = tracker(second.url, "restore", tmp_path / "b", "--segments-dir", tmp_path / "restored")
        assert "the census equals the backup's" in restored.stdout
        admin = AdminContext.from_url(second.url)
        assert census_verbs.status(admin, P) == at_backup
        found = every_item(second, admin, tmp_path / "restored")
        assert set(found) == set(NAMES) and set(found.values()) == {1}
        assert sum(at_backup[f] for f in ("todo_total", "out", "offloaded", "done", "dead")) == len(NAMES)
        assert at_backup["out"] == 120 and at_backup["offloaded"] > 0
        admin.conn.close()
    finally:
        second.stop()


def test_a_backup_through_sentinel_is_of_the_current_primary(tmp_path):
    """A redis+sentinel:// URL backs up the primary Sentinel names (its replica would do as
    well, but is not asked); restored into a single Redis, the census is the same."""
    group = SentinelGroup(tmp_path / "sentinel").start()
    try:
        admin = AdminContext.from_url(group.url())
        project_verbs.create(admin, P, SMALL)
        item_verbs.add(admin, P, NAMES[:400])
        tracker(group.url(), "maintain", "--once", "--segments-dir", tmp_path / "segments")
        manifest = json.loads(
            tracker(
                group.url(), "--json", "backup", tmp_path / "b", "--segments-dir", tmp_path / "segments"
            ).stdout
        )
        assert [n["node"] for n in manifest["redis"]["nodes"]] == [
            f"127.0.0.1:{group.current_primary_port()}"
        ]
        assert manifest["census"][P]["offloaded"] == 200
        admin.conn.close()
    finally:
        group.stop()
    with EmbeddedRedis(tmp_path / "single", port=free_port()) as single:
        restored = tracker(single.url, "restore", tmp_path / "b", "--segments-dir", tmp_path / "restored")
        assert "the census equals the backup's" in restored.stdout
