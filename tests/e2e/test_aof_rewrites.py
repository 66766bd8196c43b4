"""The AOF rewrite threshold the tracker runs Redis with (tracker_core.infra.embedded and ansible/,
one value), and benchmarks/aof_rewrites.py, which measures what it trades."""

import json
from pathlib import Path

import redis
import yaml

import aof_rewrites
from tracker_core.infra.embedded import AOF_REWRITE_MIN_SIZE_MB, EmbeddedRedis

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "redis"


def test_the_embedded_redis_rewrites_its_aof_past_the_tracker_s_minimum(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis", port=None).start()
    try:
        setting = redis.Redis.from_url(server.url).config_get("auto-aof-rewrite-min-size")
    finally:
        server.stop()
    assert int(setting["auto-aof-rewrite-min-size"]) == AOF_REWRITE_MIN_SIZE_MB * 2**20 == 256 * 2**20


def test_ansible_and_compose_deploy_the_same_minimum():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["redis_aof_rewrite_min_size_mb"] == AOF_REWRITE_MIN_SIZE_MB
    template = (ROLE / "templates" / "redis.conf.j2").read_text().splitlines()
    assert "auto-aof-rewrite-min-size {{ redis_aof_rewrite_min_size_mb }}mb" in template
    command = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["redis"]["command"]
    at = command.index("--auto-aof-rewrite-min-size")
    assert command[at + 1] == f"{AOF_REWRITE_MIN_SIZE_MB}mb"


def test_the_benchmark_counts_rewrites_below_and_none_above_the_minimum(tmp_path):
    result = aof_rewrites.main(["--items", "3000", "--min-mb", "1", "64", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "aof_rewrites.json").read_text())
    assert written["runs"] == result["runs"]
    small, large = written["runs"]
    # 3,000 claims and dones append ~5 MB: past 1 MB (how many times depends on how long each
    # rewrite takes, while the AOF goes on growing), never past 64.
    assert small["min_mb"] == 1 and small["rewrites"] >= 1 and small["rewrite_cpu_s"] > 0
    assert large["min_mb"] == 64 and large["rewrites"] == 0 and large["rewrite_cpu_us_per_item"] == 0
    assert large["aof_mb_at_restart"] > small["aof_mb_at_restart"]  # nothing compacted it
    for run in (small, large):
        assert run["items"] == 3000 and run["restart_s"] > 0  # every done item survived it
    assert "| 64 MB | 3,000 |" in (tmp_path / "aof_rewrites.md").read_text()
