"""`tracker run --demo` (the embedded Redis under ./var) backed up while it runs and serves a
claim, killed with its whole process group, its data wiped, and restored with
`tracker restore` alone: the census is the backup's and a claim is served from it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import pytest
import redis

from support.http_warrior import post_once
from support.paths import ROOT
from support.processes import free_port, start_demo, wait_for
from tracker_core.admin import census_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.items.engine import Engine

pytestmark = pytest.mark.slow

TRACKER = ROOT / ".venv" / "bin" / "tracker"
CLAIM = {"downloader": "bk-demo", "api_version": "2", "version": "1"}


def test_the_demo_backed_up_while_running_comes_back(tmp_path):
    port = free_port()
    run, env = start_demo(tmp_path, port)
    try:
        assert wait_for(lambda: "leaderboards at" in (tmp_path / "run.log").read_text(), 60, step_s=0.3)
        status, body = post_once(port, "/demo/multi=3/request", CLAIM)
        assert status == 200 and len(json.loads(body)["item_name"].split("\0")) == 3
        taken = subprocess.run(
            [TRACKER, "--json", "backup", "backups/one"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
        )
        assert taken.returncode == 0, taken.stderr
        at_backup = json.loads(taken.stdout)["census"]["demo"]
        assert at_backup["out"] == 3 and at_backup["todo_total"] > 0
        assert post_once(port, "/demo/multi=3/request", CLAIM)[0] == 200  # serving on
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
    socket = tmp_path / "var" / "redis" / "redis.sock"

    def gone() -> bool:
        try:
            return not redis.Redis(unix_socket_path=str(socket)).ping()
        except redis.RedisError:
            return True

    assert wait_for(gone, 15)
    shutil.rmtree(tmp_path / "var")
    restored = subprocess.run(
        [TRACKER, "restore", "backups/one"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert restored.returncode == 0 and "the census equals the backup's" in restored.stdout, restored.stderr
    with EmbeddedRedis(tmp_path / "var" / "redis") as embedded:  # from its AOF, as `tracker run` starts it
        assert census_verbs.status(AdminContext.from_url(embedded.url), "demo") == at_backup
        assert len(Engine(embedded.url).claim("demo", "bk-demo-2", "192.0.2.3", 2)[1]) == 2
