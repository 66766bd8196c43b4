"""The real `tracker run`: every line it and its children write is a log line (time, level,
component); on start it says where the leaderboard and the admin pages are and the exact command
that makes an admin token (which works); the access log shows no secret; a live feed that dies
is restarted, as the maintainer is."""

import json
import os
import re
import shlex
import signal
import subprocess
import urllib.error
import urllib.request

import redis

from support.processes import (
    cmdline,
    descendants,
    free_port,
    run_argv,
    run_ports,
    start,
    stop,
    wait_for,
    wait_for_line,
    wait_for_port,
)
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.infra.processes import children_of
from tracker_core.keyspace import ProjectKeys

LOG_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR) tracker\.[a-z]+: ")
SECRET = "0123456789abcdef0123"


def _status(url: str, data: bytes | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as res:
            return res.status
    except urllib.error.HTTPError as error:
        return error.code


def _live_feed(run_pid: int) -> int | None:
    """The feed that the `live --supervise` child of RUN_PID runs."""
    for pid in children_of(run_pid):
        if "live" in cmdline(pid) and "--supervise" in cmdline(pid):
            feeds = children_of(pid)
            return feeds[0] if feeds else None
    return None


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_") and k != "JOURNAL_STREAM"}


def test_run_logs_where_things_are_and_keeps_its_live_feed(tmp_path):
    port, live_port = run_ports()
    env = _clean_env()
    run = start(
        run_argv(["--data-dir", tmp_path], port, live_port, "--demo", "--access-log"), env=env, capture=True
    )
    try:
        board = wait_for_line(run, r"leaderboards at (http://\S+)", timeout_s=30).group(1)
        admin_pages = wait_for_line(run, r"admin pages at (http://\S+)").group(1)
        command = wait_for_line(run, r"make an admin token with: (.+)$").group(1)
        assert board == f"http://127.0.0.1:{port}/demo/" and _status(board) == 200
        assert admin_pages == f"http://127.0.0.1:{port}/admin" and _status(admin_pages) == 200
        made = subprocess.run(
            [*shlex.split(command), "--json"], env=env, capture_output=True, text=True, timeout=30
        )
        assert made.returncode == 0, made.stderr
        token = json.loads(made.stdout)["token"]
        assert json.loads(made.stdout)["scope"] == "*" and len(token) >= 20

        assert _status(f"http://127.0.0.1:{port}/backfeed/legacy/demo-{SECRET}?x=1", b"item\n") == 403
        wait_for_line(run, r"tracker\.access: POST /backfeed/legacy/demo-\*\*\* 403 ")

        wait_for_port(live_port, run)
        assert wait_for(lambda: _live_feed(run.pid), 15)
        feed = _live_feed(run.pid)
        os.kill(feed, signal.SIGKILL)
        wait_for_line(run, rf"WARNING tracker\.live: live {feed} was killed by SIGKILL; restarting")
        assert wait_for(lambda: _live_feed(run.pid) not in (None, feed), 15)
        wait_for_port(live_port, run)
    finally:
        assert stop(run, timeout_s=30) == 0
    wait_for(lambda: any("embedded redis-server" in line and "stopped" in line for line in run.lines), 5)
    lines = [line.rstrip("\n") for line in run.lines if line.strip()]
    strays = [line for line in lines if not LOG_LINE.match(line)]
    assert not strays, strays
    text = "\n".join(lines)
    assert SECRET not in text and token not in text and "?x=1" not in text
    assert "tracker.redis: embedded redis-server" in text and "tracker.server: serving on" in text


def _running(run_pid: int, command: str) -> bool:
    """Whether the `COMMAND --supervise` child of RUN_PID runs its own child yet."""
    supervisors = [p for p in children_of(run_pid) if command in cmdline(p) and "--supervise" in cmdline(p)]
    return any(command in cmdline(child) for pid in supervisors for child in children_of(pid))


def test_run_on_a_redis_with_a_password_keeps_it_out_of_the_process_list(tmp_path):
    """The URL reaches the maintainer and the live feed (and their supervisors) through the
    environment: no command line shows it, the token command names the variable instead, and
    on every address (--host 0.0.0.0) the lines point at one a browser here can open."""
    password = "pr0cess-list-s3cret"
    server = EmbeddedRedis(tmp_path / "redis", port=free_port()).start()
    redis.Redis.from_url(server.url).config_set("requirepass", password)
    url = f"redis://:{password}@127.0.0.1:{server.port}/0"
    port, live_port = run_ports()
    env = {**_clean_env(), "TRACKER_REDIS_URL": url}
    run = start(
        run_argv(["--data-dir", tmp_path], port, live_port, "--demo", "--host", "0.0.0.0"),
        env=env,
        capture=True,
    )
    try:
        board = wait_for_line(run, r"leaderboards at (http://\S+)(.*)$", timeout_s=30)
        assert wait_for(lambda: _running(run.pid, "maintain") and _running(run.pid, "live"), 15)
        wait_for_port(live_port, run)
        client = redis.Redis.from_url(url)
        assert wait_for(lambda: client.exists(ProjectKeys("demo").maintain_lease), 15)  # it got the URL
        family = [run.pid, *descendants(run.pid)]
        assert len(family) >= 5, family  # maintain, live, their children, a worker
        for pid in family:
            assert password not in "\0".join(cmdline(pid)), cmdline(pid)
        assert board.group(1) == f"http://127.0.0.1:{port}/demo/" and _status(board.group(1)) == 200
        assert board.group(2) == " (listening on all addresses)"
        admin_pages = wait_for_line(run, r"admin pages at (http://\S+)").group(1)
        assert admin_pages == f"http://127.0.0.1:{port}/admin"
        command = wait_for_line(run, r"make an admin token with: (.+)$").group(1)
        assert command.startswith('TRACKER_REDIS_URL="$TRACKER_REDIS_URL" '), command
        assert command.endswith(" admin token create  # TRACKER_REDIS_URL must hold the Redis URL"), command
        # As an operator pastes it into a shell where the variable holds the URL (a shell
        # variable, not exported: the command itself must hand it over, in its environment).
        pasted = f"TRACKER_REDIS_URL={shlex.quote(url)}; " + command.replace(
            " create  #", " create --json  #"
        )
        made = subprocess.run(
            ["bash", "-c", pasted], env=_clean_env(), capture_output=True, text=True, timeout=30
        )
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)["scope"] == "*"
    finally:
        assert stop(run, timeout_s=30) == 0
        redis.Redis.from_url(url).shutdown(nosave=True)
        server.process.wait(timeout=10)
    assert password not in "".join(run.lines)
    assert not any("restarting" in line for line in run.lines), run.lines
