"""shard_scale.py's cgroup caps, cheaply (about a second): a capped redis-server really is held to
its quota, and every group made (or left by a killed run) is removed with its process still alive.
Needs root and the cgroup v1 cpu controller; skipped elsewhere. The whole benchmark: shard_scale.py --quick.

    .venv/bin/python -m pytest --benchmark-disable benchmarks/test_shard_scale.py

(--benchmark-disable: without it, a run of benchmarks/ files that hold no pytest-benchmark test
leaves results/hot_paths.json empty, as conftest.py opens it for writing first.)"""

import os
import shutil
import time

import pytest
import redis

from shard_scale import CGROUP_PREFIX, CGROUP_ROOT, CpuCaps, report
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.infra.processes import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or not os.access(CGROUP_ROOT / "cgroup.procs", os.W_OK),
    reason="needs redis-server, root and the cgroup v1 cpu controller",
)


@pytest.fixture
def server(tmp_path):
    started = EmbeddedRedis(tmp_path / "redis", port=free_port(), extra=["--appendonly", "no"]).start()
    yield started
    started.stop()


def test_a_capped_redis_keeps_to_its_quota_and_the_groups_go(server):
    (CGROUP_ROOT / f"{CGROUP_PREFIX}stale-test").mkdir()  # as a killed run leaves it
    assert f"{CGROUP_PREFIX}stale-test" in CpuCaps.remove_stale()
    caps = CpuCaps(10_000)
    try:
        caps.add(server.port, server.process.pid)
        caps.set(0.1)
        group = CGROUP_ROOT / f"{CGROUP_PREFIX}{server.port}"
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "1000"
        assert str(server.process.pid) in (group / "cgroup.procs").read_text().split()
        client = redis.Redis(port=server.port)
        busy = "local n = 0 for i = 1, tonumber(ARGV[1]) do n = n + i end return 0"
        cpu = client.info("cpu")
        before = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
        started = time.monotonic()
        while time.monotonic() - started < 0.6:
            client.eval(busy, 0, 200_000)
        wall = time.monotonic() - started
        cpu = client.info("cpu")
        share = (float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]) - before) / wall
        assert share < 0.2, f"a Redis capped at 10% of a core used {share:.0%}"
        assert caps.throttling()[server.port][1] > 0
    finally:
        caps.remove_all()
    assert not list(CGROUP_ROOT.glob(CGROUP_PREFIX + "*"))
    assert server.process.poll() is None
    assert str(server.process.pid) in (CGROUP_ROOT / "cgroup.procs").read_text().split()


def test_the_report_reads_a_stand_in_run():
    node = {"port": 1, "cpu_us_per_item": 70.0, "throttled_share": 0.97, "script_calls_per_s": 1000}
    runs = []
    for shards, rate in ((1, 1000.0), (2, 1900.0)):
        for mode, multi in (("claim", 1), ("claim", 10), ("cycle", 1)):
            runs.append(
                {
                    "shards": shards,
                    "mode": mode,
                    "multi": multi,
                    "claims_per_s": rate,
                    "items_per_s": rate * multi,
                    "dones_per_s": rate / 2,
                    "nodes": [node] * shards,
                    "worker_cpu_share": 0.3,
                    "machine_busy_share": 0.5,
                }
            )
    results = {
        "command": "python benchmarks/shard_scale.py --quick",
        "date": "2026-11-28T17:00:00Z",
        "commit": "abc1234",
        "tracker_source": {"commit": "abc1234", "src_changed": False},
        "load_average": [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]],
        "machine": {"cpus": 2},
        "machine_detail": {"cpu_model": "a CPU"},
        "versions": {"redis": "7.0.15"},
        "seconds_total": 50.0,
        "sharded_projects": False,
        "plan": {
            "shard_counts": [1, 2],
            "cap": 0.1,
            "cfs_period_us": 10_000,
            "workers": 24,
            "connections": 96,
            "seconds": 2,
            "rounds": 1,
            "items_per_shard": 25_000,
        },
        "runs": runs,
        "end_of_project": [],
        "items_seeded": 1,
        "seconds_seeding_and_recycling": 1.0,
    }
    text = report(results)
    assert "| 2 | 1,900 | 1,900 (19,000) | 950 | 70, 70 | 1.19, 1.19, 1.19 |" in text
    assert "Stand-in" in text
