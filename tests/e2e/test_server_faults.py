"""Hard faults of the server's processes and descriptors, on the real processes (issue 12).

kill -9 of `tracker serve` and of `tracker run`, a second run on one data directory, the
descriptor limit, and secrets in what the server prints.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
import redis

from support.paths import TRACKER_BIN
from support.processes import ServerProcess as Server
from support.processes import (
    alive,
    cpu_s,
    descendants,
    free_port,
    port_open,
    renderer_pid,
    start,
    start_serve,
    stop,
    stop_pids,
    wait_for,
    wait_for_port,
)
from support.processes import children_of as children
from support.raw_http import read_until_closed, status_line
from tracker_core.infra.embedded import EmbeddedRedis


def wait_gone(pids, timeout_s: float) -> list[int]:
    """The pids of PIDS still alive after up to TIMEOUT_S."""
    wait_for(lambda: not any(alive(p) for p in pids), timeout_s)
    return [p for p in pids if alive(p)]


def get(port: int, path: str = "/metrics", timeout_s: float = 5.0) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout_s) as res:
        return res.status


def kill_all(pids):
    stop_pids(pids, timeout_s=0, sig=signal.SIGKILL)


# -- kill -9 of the parent ---------------------------------------------------------------


def test_workers_die_with_a_killed_serve_and_the_port_is_free_again(redis_url):
    """kill -9 gives `tracker serve` no chance to stop its workers: the kernel must (their
    parent-death signal), or they keep serving and the next serve finds the port taken."""
    first = Server(redis_url, workers=2)
    workers = list(first.workers)
    assert len(workers) == 2
    renderer = renderer_pid(first.process.pid)
    assert renderer is not None and renderer not in workers
    assert get(first.port) == 200
    again = None
    try:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
        assert wait_gone([*workers, renderer], 5) == [], "workers or the renderer outlived their parent"
        assert not port_open(first.port), "something still serves the killed server's port"
        again, _ = start_serve(redis_url, port=first.port, capture=True)
        assert get(first.port) == 200
        assert not any("in use" in line for line in again.lines), again.lines
    finally:
        stop(again)
        kill_all([*workers, renderer])


def _run(data_dir, port: int, *extra: str) -> subprocess.Popen:
    """`tracker run` on DATA_DIR; its output (stdout and stderr) in a text pipe."""
    return start(
        [TRACKER_BIN, "--data-dir", data_dir, "run", "--port", str(port), "--workers", "1", *extra],
        capture=True,
    )


@pytest.mark.parametrize("same_port", [False, True], ids=["own-port", "same-port"])
def test_a_second_run_on_one_data_directory_is_refused(tmp_path, same_port):
    """The data directory is named, not the port: a second `tracker run` as the first was
    started (same port too) must hear that the directory is busy."""
    port = free_port()
    first = _run(tmp_path, port, "--live-port", "0")
    try:
        wait_for_port(port, timeout_s=30, process=first)
        second = _run(tmp_path, port if same_port else free_port(), "--live-port", "0")
        err, _ = second.communicate(timeout=20)
        assert second.returncode == 1
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "in use by another tracker run" in lines[0], err
        assert f"pid {first.pid}" in lines[0]
        # The first still serves, on its own Redis and socket.
        assert (tmp_path / "redis" / "redis.sock").exists()
        assert get(port) == 200
    finally:
        stop(first, timeout_s=30)


def test_a_killed_run_takes_its_children_along_and_a_new_run_recovers(tmp_path):
    port, live_port = free_port(), free_port()
    first = _run(tmp_path, port, "--demo", "--live-port", str(live_port))
    family = []
    try:
        wait_for_port(port, timeout_s=30, process=first)
        wait_for_port(live_port, timeout_s=15)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # redis, maintain (and its child), live, a worker
            family = descendants(first.pid)
            if len(family) >= 5:
                break
            time.sleep(0.1)
        assert len(family) >= 5, family
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert wait_gone(family, 15) == [], "children outlived a killed tracker run"
        again = _run(tmp_path, port, "--live-port", "0")
        try:
            wait_for_port(port, timeout_s=30, process=again)
            assert get(port) == 200
            r = redis.Redis(unix_socket_path=str(tmp_path / "redis" / "redis.sock"))
            assert r.ping()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/demo/stats.json", timeout=5) as res:
                assert res.status == 200  # the demo project survived the kill
        finally:
            stop(again, timeout_s=30)
    finally:
        kill_all(family)


def test_a_redis_left_by_a_killed_tracker_is_stopped_before_a_new_one_starts(tmp_path):
    """Whatever killed the tracker, the next start must not run a second Redis on the dir."""
    orphan = EmbeddedRedis(tmp_path).start()
    pid = orphan.process.pid
    orphan.process = None  # forget it, as a killed tracker would
    fresh = None
    try:
        r = redis.Redis(unix_socket_path=str(tmp_path / "redis.sock"))
        r.set("kept", "yes")
        fresh = EmbeddedRedis(tmp_path).start()
        assert not alive(pid)
        assert fresh.process.pid != pid
        assert redis.Redis.from_url(fresh.url).get("kept") == b"yes"  # AOF flushed on the way
    finally:
        if fresh is not None:
            fresh.stop()
        kill_all([pid])


# -- descriptors -------------------------------------------------------------------------


def _nofile(soft: int, hard: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _soft_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise KeyError("Max open files")


def test_the_descriptor_limit_is_raised_to_the_hard_limit(redis_url):
    server = Server(redis_url, preexec_fn=_nofile(256, 4096))
    try:
        assert _soft_nofile(server.workers[0]) == 4096
    finally:
        server.stop()


def _server_cpu_s(parent: int) -> float:
    """CPU seconds of tracker serve and its workers, those that exited included (the parent's
    cutime/cstime hold a reaped worker's), so a worker replaced mid-measure is still counted."""
    with open(f"/proc/{parent}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for pid in children(parent):
        try:
            total += cpu_s(pid)
        except FileNotFoundError:
            pass  # exited between the listing and the read: in cutime next time
    return total


def test_a_flood_at_the_descriptor_limit_does_not_spin_and_service_comes_back(redis_url):
    """bjoern spins on accept() = EMFILE at full CPU; the guard keeps it below the limit.

    Measured over the server and all its workers: at a 96-descriptor limit a worker now and then
    aborts in libev (epoll_create: too many open files) and the parent replaces it; what must
    hold is that nothing spins and service comes back."""
    server = Server(redis_url, "--idle-timeout", "30", "--request-timeout", "30", preexec_fn=_nofile(96, 96))
    parent = server.process.pid
    flood = []
    try:
        for _ in range(400):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n")  # and never finish
            flood.append(sock)
        time.sleep(1.0)
        cpu_before, wall_before = _server_cpu_s(parent), time.monotonic()
        time.sleep(4.0)
        busy = (_server_cpu_s(parent) - cpu_before) / (time.monotonic() - wall_before)
        assert busy < 0.35, f"server at {busy:.0%} CPU under the flood"
        for sock in flood:
            sock.close()
        flood.clear()
        deadline = time.monotonic() + 10
        answer = b""
        while time.monotonic() < deadline:
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                answer, _ = read_until_closed(sock, 3)
            if status_line(answer) == b"HTTP/1.1 200 OK":
                break
            time.sleep(0.2)
        assert status_line(answer) == b"HTTP/1.1 200 OK"
        assert children(parent), "no worker serving"
    finally:
        for sock in flood:
            sock.close()
        server.stop()


# -- secrets -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,secret",
    [
        ("tracker: serving on http://h:1, Redis redis://:s3cretpass@10.0.0.1:6379/0", "s3cretpass"),
        ("Redis redis://tracker:s3cretpass@10.0.0.1/0 down", "s3cretpass"),
        ("redis+sentinel://:s3cretpass@a:26379,b:26379/mymaster", "s3cretpass"),
        ("tracker: POST /backfeed/legacy/my-proj-0123456789abcdef0123: OOM", "0123456789abcdef0123"),
        ("Authorization: Bearer tok_abcdefgh12345", "tok_abcdefgh12345"),
        ("GET /admin?token=abcd1234efgh", "abcd1234efgh"),
        # a raw '@' in the password: everything up to the authority's last '@' is the password
        ("Redis redis://:pa@ss@10.0.0.1:6379/0 down", "ss@"),
        ("Redis redis://tracker:p@ss@w0rd@10.0.0.1/0 down", "w0rd"),
        # the backfeed secret percent-encoded, in part or whole, or the path's '-' or '/' encoded
        ("tracker: POST /backfeed/legacy/P-%61bcd0123: OOM", "bcd0123"),
        ("POST /backfeed/legacy/my-proj-%30%31%32%33%34%35%36%37 503", "%34%35%36%37"),
        ("POST /backfeed/legacy/my-proj%2D0123456789abcdef 503", "0123456789abcdef"),
        ("POST /backfeed%2Flegacy/my-proj-0123456789abcdef 503", "0123456789abcdef"),
        ("POST /backfeed/legacy/p-ab 503", "-ab"),
    ],
)
def test_redact_hides_every_kind_of_secret(text, secret):
    from tracker_api.web.redact import redact

    cleaned = redact(text)
    assert secret not in cleaned and "***" in cleaned


def test_redact_keeps_the_host_after_a_password_holding_at_signs():
    from tracker_api.web.redact import redact

    assert redact("Redis redis://:pa@ss@host:6379/0 down") == "Redis redis://:***@host:6379/0 down"
    assert redact("POST /backfeed/legacy/disc-o-%61bcd 200") == "POST /backfeed/legacy/disc-o-*** 200"


def test_redact_keeps_what_is_not_secret():
    from tracker_api.web.redact import redact

    for text in (
        "tracker: serving on http://127.0.0.1:8080 with 2 worker(s), Redis redis://127.0.0.1:6379/0",
        "unix:///var/redis.sock",
        "/p/done 200",
    ):
        assert redact(text) == text


def test_the_redis_password_never_reaches_the_log(tmp_path):
    password = "s3cretpassword42"
    server_redis = EmbeddedRedis(tmp_path, port=free_port()).start()
    redis.Redis.from_url(server_redis.url).config_set("requirepass", password)
    url = f"redis://:{password}@127.0.0.1:{server_redis.port}/0"
    port = free_port()
    log = tmp_path / "serve.log"
    process = start(
        [TRACKER_BIN, "--redis-url", url, "serve", "--port", str(port), "--workers", "1"], output=log
    )
    try:
        wait_for_port(port, process=process)
        assert get(port) == 200
    finally:
        stop(process)
        redis.Redis.from_url(url).shutdown(nosave=True)
        server_redis.process.wait(timeout=10)
    text = log.read_text()
    assert "serving on" in text and "redis://:***@127.0.0.1" in text
    assert password not in text


def test_a_script_error_on_a_backfeed_path_logs_no_secret(capsys):
    import logging
    import sys

    from falcon import testing as falcon_testing

    from tracker_api.web import logs
    from tracker_api.web.errors import script_handler
    from tracker_core.scripts import ScriptError

    secret = "0123456789abcdef0123456789abcdef"
    req = falcon_testing.create_req(method="POST", path=f"/backfeed/legacy/disc-o-{secret}")
    resp = falcon_testing.create_resp() if hasattr(falcon_testing, "create_resp") else None
    if resp is None:
        import falcon

        resp = falcon.Response()
    logs.setup(stream=sys.stderr)  # as `tracker serve` sets it up (capsys' stderr)
    try:
        script_handler(req, resp, ScriptError(f"OOM in bloom_add for /backfeed/legacy/disc-o-{secret}"), {})
    finally:
        logging.getLogger(logs.ROOT_LOGGER).handlers.clear()  # capsys' stream closes after the test
    err = capsys.readouterr().err
    assert "ERROR tracker.server: POST" in err
    assert "/backfeed/legacy/disc-o-***" in err and secret not in err
    assert resp.status in (503, "503 Service Unavailable")


def test_everything_the_server_prints_is_redacted(capsys):
    import sys

    from tracker_api.web.redact import RedactingStream

    stream = RedactingStream(sys.stderr)
    print("Traceback: redis.exceptions.AuthenticationError for redis://u:hunter2@h:6379/0", file=stream)
    assert "hunter2" not in capsys.readouterr().err


def test_click_output_through_the_redacting_stream_is_text_not_bytes_reprs():
    # click probes a stream with write(b"") to choose text or binary output: a redacting stream
    # that took bytes made `tracker run` print "b'tracker: embedded Redis at ...'".
    import io

    import click

    from tracker_api.web.redact import RedactingStream

    out = io.StringIO()
    click.echo("tracker: embedded Redis at redis://:hunter2@h:6379/0", file=RedactingStream(out))
    assert out.getvalue() == "tracker: embedded Redis at redis://:***@h:6379/0\n"
