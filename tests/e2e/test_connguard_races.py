"""The connection guard never answers 408/503 for a request that may still run, and never acts
on a descriptor number that was reused under it (issue 12, review of connguard.py)."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest
import redis

from support.processes import ServerProcess as Server
from support.raw_http import read_until_closed, status_line
from tracker_api.connections.connguard import TIMEOUT_408, ConnectionGuard
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.keyspace import ProjectKeys

PROJECT = "proj1"


def _request(downloader: str) -> bytes:
    body = f'{{"downloader": "{downloader}", "api_version": "2"}}'.encode()
    return (
        f"POST /{PROJECT}/request HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


@pytest.fixture
def pair():
    """A listening socket, a client, and the accepted server side (which nobody reads)."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname(), timeout=5)
    accepted, _ = listener.accept()
    yield listener, client, accepted
    for sock in (client, accepted, listener):
        sock.close()


def _guard(listener) -> ConnectionGuard:
    return ConnectionGuard(listener, idle_timeout_s=2, request_timeout_s=4, max_body_bytes=1 << 20)


def _inode(sock) -> int:
    return os.fstat(sock.fileno()).st_ino


def _server_reads(accepted) -> bytes | str:
    accepted.settimeout(1)
    try:
        return accepted.recv(65536)
    except ConnectionResetError:
        return "reset"
    except TimeoutError:
        return "nothing"


def test_a_close_with_a_whole_request_unread_sends_no_408_and_bjoern_cannot_read_it(pair):
    """The request waited behind a busy worker: cut, unanswered, and gone from the kernel."""
    listener, client, accepted = pair
    request = _request("victim")
    client.sendall(request)
    time.sleep(0.1)
    guard = _guard(listener)
    guard._close(accepted.fileno(), _inode(accepted), TIMEOUT_408, "slow")
    answer, closed_after = read_until_closed(client, 3)
    assert answer == b"" and closed_after is not None
    assert _server_reads(accepted) in ("reset", b"")  # never the request
    assert guard.reset_unread == 1 and guard.closed_total["slow"] == 1


def test_a_408_close_also_drops_what_the_client_sends_after_it(pair):
    listener, client, accepted = pair
    client.sendall(b"POST /proj1/request HTTP/1.1\r\n")
    assert accepted.recv(100)  # bjoern has read the part
    guard = _guard(listener)
    guard._close(accepted.fileno(), _inode(accepted), TIMEOUT_408, "slow")
    assert status_line(client.recv(4096)) == b"HTTP/1.1 408 Request Timeout"
    try:
        client.sendall(b"Host: t\r\nContent-Length: 2\r\n\r\n{}")  # the rest, too late
    except (BrokenPipeError, ConnectionResetError):
        pass
    time.sleep(0.1)
    assert _server_reads(accepted) in ("reset", b"")
    assert getattr(guard, "reset_unread", 0) == 0


def test_the_guard_acts_on_the_socket_it_checked_even_if_the_number_is_reused(pair, monkeypatch):
    """bjoern closes the number and accepts a new client on it right after the guard's check:
    the guard must still cut the socket it meant, never the new one."""
    listener, client, accepted = pair
    other_client = socket.create_connection(listener.getsockname(), timeout=5)
    other, _ = listener.accept()
    meant_fd, meant_inode = accepted.fileno(), _inode(accepted)
    kept = os.dup(meant_fd)  # the meant socket, alive under another number
    swapped = []

    def reuse_now():
        if not swapped:
            swapped.append(True)
            os.dup2(other.fileno(), meant_fd)  # the number now holds the new client

    real_readlink, real_fstat = os.readlink, os.fstat

    def readlink(path, *args, **kwargs):
        result = real_readlink(path, *args, **kwargs)
        if str(path) == f"/proc/self/fd/{meant_fd}":
            reuse_now()
        return result

    def fstat(fd):
        result = real_fstat(fd)
        if result.st_ino == meant_inode:
            reuse_now()
        return result

    monkeypatch.setattr(os, "readlink", readlink)
    monkeypatch.setattr(os, "fstat", fstat)
    try:
        _guard(listener)._close(meant_fd, meant_inode, None, "idle")
        monkeypatch.undo()
        # The new client is untouched: it still talks to its server side.
        other_client.sendall(b"ping")
        other.settimeout(2)
        assert other.recv(10) == b"ping"
        # The meant one was cut.
        answer, closed_after = read_until_closed(client, 3)
        assert closed_after is not None
    finally:
        monkeypatch.undo()
        os.close(kept)
        other_client.close()
        other.close()


@pytest.fixture
def stoppable_redis(tmp_path):
    """A Redis of the test's own, to SIGSTOP without stalling the other tests' one."""
    server = EmbeddedRedis(tmp_path / "redis", port=free_port()).start()
    yield server
    try:
        os.kill(server.process.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    server.stop()


def test_a_request_that_waited_behind_a_stalled_worker_is_never_answered_408_and_run(stoppable_redis):
    """The reviewer's sequence: B's request arrives whole while the only worker is stuck in a
    Redis call for A. B must either get its item or be told nothing was done; never a 408 while
    its claim is made behind its back."""
    admin = AdminContext.from_url(stoppable_redis.url)
    project_verbs.create(admin, PROJECT)
    item_verbs.add(admin, PROJECT, [f"https://example.com/{i}?a=b#c d%20e" for i in range(20)])
    r = redis.Redis.from_url(stoppable_redis.url, decode_responses=True)

    def victim_claims() -> int:
        return int(r.hget(ProjectKeys(PROJECT).downloader_claims, "victim") or 0)

    server = Server(stoppable_redis.url, "--idle-timeout", "2", "--request-timeout", "4")
    redis_pid = stoppable_redis.process.pid
    try:
        assert victim_claims() == 0
        request_b = _request("victim")
        b = server.connect()
        b.sendall(request_b[:20])  # bjoern accepts B and starts its request
        time.sleep(0.3)
        os.kill(redis_pid, signal.SIGSTOP)
        a = server.connect()
        a.sendall(_request("blocker"))  # the worker blocks in its script call
        time.sleep(1.6)
        b.sendall(request_b[20:])  # B is whole in the kernel, behind A
        answer_b, closed_b = read_until_closed(b, 6)
        os.kill(redis_pid, signal.SIGCONT)
        answer_a, _ = read_until_closed(a, 15)
        if closed_b is None:  # still open: B's request ran after the stall
            more, closed_b = read_until_closed(b, 15)
            answer_b += more
        a.close()
        b.close()
        time.sleep(0.5)
        claims = victim_claims()
        got_item = status_line(answer_b) == b"HTTP/1.1 200 OK"
        # Told 408 (or cut with no answer): nothing claimed. Answered 200: exactly one claim.
        assert claims == (1 if got_item else 0), (answer_b[:200], claims)
        assert status_line(answer_b) != b"HTTP/1.1 408 Request Timeout" or claims == 0
        assert status_line(answer_a).startswith(b"HTTP/1.1 "), answer_a[:200]
    finally:
        os.kill(redis_pid, signal.SIGCONT)
        server.stop()
