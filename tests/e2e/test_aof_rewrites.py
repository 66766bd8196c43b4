"""The AOF rewrite threshold the tracker runs Redis with (tracker_core.infra.embedded and ansible/,
one value; what it trades was measured once: docs/performance.md, "Finished studies")."""

from pathlib import Path

import redis
import yaml

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
