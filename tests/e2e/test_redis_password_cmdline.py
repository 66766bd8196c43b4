"""The Redis password reaches `tracker serve`, `tracker run` and all they start without being
readable on any command line (issue 26): given in the environment or a file it never is; given
in --redis-url it is masked in the process title before anything forks, with a warning.

Real processes on a password-protected real redis-server; every /proc/PID/cmdline of the
command and its descendants is read while they serve a claim.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest
import redis

from support.http_warrior import post_json
from support.paths import TRACKER_BIN
from support.processes import descendants, free_port, start, stop, wait_for, wait_for_port
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis

PASSWORD = "s3cret-Pa55word-never-shown"
PROJECT = "pwproj"
WARNING = "Warning: the Redis password came on the command line"


@pytest.fixture(scope="module")
def protected_redis(tmp_path_factory):
    """A redis-server that asks for PASSWORD, holding a project with items to claim."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("protected"), port=free_port()).start()
    redis.Redis.from_url(server.url).config_set("requirepass", PASSWORD)
    host = f"127.0.0.1:{server.port}"
    admin = AdminContext.from_url(f"redis://:{PASSWORD}@{host}/0")
    project_verbs.create(admin, PROJECT)
    item_verbs.add(admin, PROJECT, [f"{PROJECT}-{i}" for i in range(100)])
    yield host
    redis.Redis.from_url(f"redis://:{PASSWORD}@{host}/0").shutdown(nosave=True)
    server.process.wait(timeout=10)


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}
    return dict(env, **extra)


def _how(how: str, host: str, tmp_path) -> tuple[list[str], dict[str, str]]:
    """(global options, environment) giving the URL of HOST's Redis the way HOW says."""
    url = f"redis://:{PASSWORD}@{host}/0"
    if how == "command line":
        return ["--redis-url", url], _environment()
    if how == "environment":
        return [], _environment(TRACKER_REDIS_URL=url)
    password_file = tmp_path / "redis-password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    return ["--redis-url", f"redis://{host}/0", "--redis-password-file", str(password_file)], _environment()


def _command_lines(pid: int) -> dict[int, bytes]:
    """The command line of PID and of each process below it, as the kernel shows them."""
    found = {}
    for each in [pid, *descendants(pid)]:
        try:
            with open(f"/proc/{each}/cmdline", "rb") as f:
                found[each] = f.read()
        except OSError:
            pass  # gone between the listing and the read
    return found


def _name(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


@pytest.mark.parametrize("how", ["command line", "environment", "password file"])
@pytest.mark.parametrize("command", ["serve", "run"])
def test_no_command_line_shows_the_redis_password(protected_redis, tmp_path, how, command):
    options, env = _how(how, protected_redis, tmp_path)
    port = free_port()
    argv = [TRACKER_BIN, *options, command, "--port", str(port), "--workers", "2"]
    # serve: its 2 workers (and any helper it forks); run: also maintain and live, each a
    # supervisor and its child.
    expected = 2
    if command == "run":
        argv += ["--data-dir", str(tmp_path / "data"), "--live-port", str(free_port())]
        expected = 6
    log = tmp_path / "tracker.log"
    process = start(argv, env=env, output=log)
    try:
        wait_for_port(port, process)
        assert wait_for(lambda: len(descendants(process.pid)) >= expected, 15), descendants(process.pid)
        status, body = post_json(
            f"http://127.0.0.1:{port}",
            f"/{PROJECT}/request",
            {"downloader": "pwtester", "api_version": "2", "version": "1"},
        )
        assert status == 200 and json.loads(body)["item_name"].startswith(PROJECT)
        lines = _command_lines(process.pid)
        assert len(lines) > expected
        shown = [pid for pid, line in lines.items() if PASSWORD.encode() in line]
        assert not shown, {pid: lines[pid] for pid in shown}
        assert command.encode() in lines[process.pid]  # the title still says what runs
        assert _name(process.pid) == "tracker"  # ps and pgrep still find it by its name
        if how == "command line":
            assert f"redis://:***@{protected_redis}/0".encode() in lines[process.pid]
    finally:
        stop(process)
    text = log.read_text()
    assert PASSWORD not in text
    warnings = [line for line in text.splitlines() if WARNING in line]
    assert len(warnings) == (1 if how == "command line" else 0), text
    if warnings:
        assert "TRACKER_REDIS_URL" in warnings[0] and "--redis-password-file" in warnings[0]


def test_a_wrong_password_file_is_refused_in_one_line(protected_redis, tmp_path):
    """A password file that does not open the Redis fails the start, as a wrong URL does."""
    password_file = tmp_path / "wrong"
    password_file.write_text("not-the-password\n")
    log = tmp_path / "maintain.log"
    process = start(
        [
            TRACKER_BIN,
            "--redis-url",
            f"redis://{protected_redis}/0",
            "--redis-password-file",
            str(password_file),
            "maintain",
            "--once",
        ],
        env=_environment(),
        output=log,
    )
    assert process.wait(timeout=30) != 0
    assert "not-the-password" not in log.read_text()


def test_a_metrics_token_on_the_command_line_is_masked_too(protected_redis, tmp_path):
    token = "metrics-T0ken-never-shown"
    options, env = _how("environment", protected_redis, tmp_path)
    port = free_port()
    argv = [TRACKER_BIN, *options, "serve", "--port", str(port), "--workers", "2", "--metrics-token", token]
    log = tmp_path / "tracker.log"
    process = start(argv, env=env, output=log)
    try:
        wait_for_port(port, process)
        assert wait_for(lambda: len(descendants(process.pid)) >= 2, 15)
        lines = _command_lines(process.pid)
        shown = [pid for pid, line in lines.items() if token.encode() in line]
        assert not shown, {pid: lines[pid] for pid in shown}
        assert b"--metrics-token" in lines[process.pid]
        # The token still works: a scrape with it sees the refusals outside projects.
        request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
        request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert b"tracker_build_info" in answer.read()
    finally:
        stop(process)
    text = log.read_text()
    assert token not in text
    assert "Warning: the metrics token came on the command line" in text and "TRACKER_METRICS_TOKEN" in text
