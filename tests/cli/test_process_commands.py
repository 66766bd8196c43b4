"""`tracker run` and `tracker serve` hand their options (or TRACKER_... variables) to the app in
one AppConfig, and `tracker run` keeps the maintainer running."""

import json
import os
import re
import shlex
import signal
import subprocess
import urllib.error
import urllib.request

from support.processes import (
    cmdline,
    run_argv,
    run_ports,
    start,
    start_serve,
    stop,
    wait_for,
    wait_for_port,
)
from tracker_core.admin import project_verbs
from tracker_core.infra.processes import children_of

TOKEN = "metrics-token-from-the-environment"


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _live_url_shown(base: str, project: str) -> str:
    status, page = _get(f"{base}/{project}/")
    assert status == 200
    return re.search(r'<meta name="tracker-live-url" content="([^"]*)">', page).group(1)


def test_serve_takes_its_settings_from_options_and_environment_variables(redis_url, admin):
    project_verbs.create(admin, "shown")
    env = dict(os.environ, TRACKER_LIVE_URL="ws://feed.example:9/live", TRACKER_METRICS_TOKEN=TOKEN)
    process, port = start_serve(redis_url, "--memory-guard-percent", "50", workers=2, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(4):  # both workers got the same config
            assert _live_url_shown(base, "shown") == "ws://feed.example:9/live"
            assert _get(f"{base}/metrics", TOKEN)[0] == 200
        assert _get(f"{base}/metrics", "another-token")[0] == 401
    finally:
        assert stop(process) == 0


def _maintainers(run_pid: int) -> tuple[int | None, int | None]:
    """(the `maintain --supervise` child of RUN_PID, the maintainer it runs)."""
    for pid in children_of(run_pid):
        if "maintain" in cmdline(pid) and "--supervise" in cmdline(pid):
            workers = [p for p in children_of(pid) if "maintain" in cmdline(p)]
            return pid, (workers[0] if workers else None)
    return None, None


def test_run_points_the_page_at_its_feed_and_restarts_a_dead_maintainer(tmp_path):
    port, live_port = run_ports()  # the feed's not the default, so the page must be told
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    run = start(
        run_argv(["--data-dir", tmp_path], port, live_port, "--demo"), env=env, output=tmp_path / "run.log"
    )
    try:
        wait_for_port(port, timeout_s=30, process=run)
        assert _live_url_shown(f"http://127.0.0.1:{port}", "demo") == f":{live_port}"
        seen = []  # one reading: the maintainer may be restarted between two
        assert wait_for(lambda: seen.append(_maintainers(run.pid)) or seen[-1][1], 15)
        supervisor, maintainer = seen[-1]
        os.kill(maintainer, signal.SIGKILL)
        assert wait_for(lambda: _maintainers(run.pid)[1] not in (None, maintainer), 15), (
            tmp_path / "run.log"
        ).read_text()
        assert _maintainers(run.pid)[0] == supervisor
        assert (
            "maintain" in (tmp_path / "run.log").read_text()
            and "restarting" in (tmp_path / "run.log").read_text()
        )
    finally:
        assert stop(run, timeout_s=30) == 0
    assert not (tmp_path / "redis" / "redis.sock").exists()


def test_the_token_command_names_a_plain_url_and_works(redis_url):
    from tracker_api.cli.process_commands import token_command

    command = token_command(redis_url, "var", explicit_redis=True)
    assert command.endswith(shlex.join(["--redis-url", redis_url, "admin", "token", "create"]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    made = subprocess.run(
        [*shlex.split(command), "--json"], env=env, capture_output=True, text=True, timeout=30
    )
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["scope"] == "*"


def test_the_token_command_never_shows_a_password():
    from tracker_api.cli.process_commands import token_command

    for url in ("redis://:pw@10.0.0.1:6379/0", "rediss://tracker:pw@h/0", "redis+sentinel://:pw@a:1,b:2/m"):
        command = token_command(url, "var", explicit_redis=True)
        assert ":pw@" not in command and "***" not in command
        # In the command's environment, not on its command line (every local user reads those).
        assert command.startswith('TRACKER_REDIS_URL="$TRACKER_REDIS_URL" ') and "--redis-url" not in command
        assert command.endswith(" admin token create  # TRACKER_REDIS_URL must hold the Redis URL")
    assert token_command("unix:///d/redis.sock", "my data", explicit_redis=False).endswith(
        "--data-dir 'my data' admin token create"
    )


def test_the_start_up_urls_name_an_address_a_browser_can_open():
    from tracker_api.cli.server_options import listens_everywhere, reachable_host

    assert [reachable_host(h) for h in ("0.0.0.0", "::", "", "127.0.0.1", "::1", "tracker.example")] == [
        "127.0.0.1", "[::1]", "127.0.0.1", "127.0.0.1", "[::1]", "tracker.example",
    ]  # fmt: skip
    assert [listens_everywhere(h) for h in ("0.0.0.0", "::", "", "127.0.0.1", "::1")] == [True] * 3 + [
        False
    ] * 2
