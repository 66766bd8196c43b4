"""A worker held at its descriptor limit idles, and serves again once connections close (issue 26).

Before: 0.37 CPU-s/s in a worker whose clients held it near a 1,024-descriptor limit (the guard
scanned every descriptor every 20 ms), and 1.4-1.8 at a 96-descriptor limit with every connection
busy (bjoern spinning on accept() = EMFILE, the guard scanning beside it). Now 0.01 and 0.05 (the
latter the busy connections' own reads). See connguard.py.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import threading
import time

import pytest

from support.processes import ServerProcess, children_of, cpu_s, wait_for
from support.projects import new_project
from support.raw_http import read_until_closed, status_line

PROJECT = "fdlimit"
MEASURE_S = 4.0
# Where the guard sheds down to at a 1,024 limit (connguard: limit - 2 x limit/8), less the
# descriptor its own listing of /proc/self/fd counts: near the limit, where it used to scan every
# descriptor every 20 ms.
NEAR_1024 = 1024 - 2 * 128 - 1


def _nofile(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _worker_holding(server: ServerProcess, descriptors: int) -> int:
    """The bjoern worker once it holds DESCRIPTORS or more: of `serve`'s children (the worker
    and any helper it forks), the one holding the clients' connections."""

    def busiest() -> int:
        return max(children_of(server.process.pid), key=_descriptors)

    assert wait_for(lambda: _descriptors(busiest()) >= descriptors, 10), _descriptors(busiest())
    return busiest()


def _cpu_per_s(pid: int, seconds: float = MEASURE_S) -> float:
    cpu_before, wall_before = cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_s(pid) - cpu_before) / (time.monotonic() - wall_before)


def _claim_request(downloader: str) -> bytes:
    body = json.dumps({"downloader": downloader, "api_version": "2"}).encode()
    return (
        f"POST /{PROJECT}/request HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def _claims_an_item(server: ServerProcess, sock: socket.socket | None = None, limit_s: float = 10) -> bool:
    """Whether a claim (sent on SOCK, already sent there if given) is answered with an item."""
    if sock is None:
        sock = server.connect()
        sock.sendall(_claim_request("after"))
    with sock:
        answer, _ = read_until_closed(sock, limit_s)
    return status_line(answer) == b"HTTP/1.1 200 OK" and PROJECT.encode() in answer.split(b"\r\n\r\n", 1)[-1]


@pytest.fixture
def project(admin):
    return new_project(admin, PROJECT, [f"{PROJECT}-item-{i}" for i in range(20)])


@pytest.fixture
def many_descriptors():
    """This test process holds a few thousand client sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_worker_held_near_its_descriptor_limit_idles_and_serves_once_they_close(
    redis_url, project, many_descriptors
):
    """1,500 silent connections against a 1,024 limit: the guard sheds down to its low-water
    mark and the clients hold the rest open. The worker then has nothing to do: it must idle."""
    server = ServerProcess(
        redis_url, "--idle-timeout", "60", "--request-timeout", "60", preexec_fn=_nofile(1024)
    )
    held = []
    try:
        for _ in range(1500):
            held.append(server.connect())
        worker = _worker_holding(server, NEAR_1024)
        time.sleep(1.0)  # the shedding settles
        try:
            # on a busy machine the worker may still be taking queued connections back up to it
            wait_for(lambda: _descriptors(worker) >= NEAR_1024, 10)
            busy = _cpu_per_s(worker)
        except FileNotFoundError:
            # Seen once in a full `make test`: the worker died at the limit, as libev can abort
            # ("epoll_create: Too many open files"); the parent replaces it. A known fault, still
            # open: reported as such, not hidden as a pass.
            pytest.xfail("the worker died at its descriptor limit (libev abort, open)")
        assert _descriptors(worker) >= NEAR_1024
        assert busy < 0.1, f"worker at {busy:.3f} CPU-s/s held near its descriptor limit"
        for sock in held:
            sock.close()
        held.clear()
        assert wait_for(lambda: _claims_an_item(server, limit_s=3), 15)
        assert worker in children_of(server.process.pid)  # the same worker, not a replacement
    finally:
        for sock in held:
            sock.close()
        server.stop()


def test_a_worker_at_its_descriptor_limit_with_nothing_to_shed_does_not_spin(redis_url, project):
    """Every connection busy (a byte every 10 ms: never silent long enough to shed) and more
    waiting than the 96-descriptor limit allows: bjoern's accept() fails with EMFILE while the
    listening socket stays readable. The guard pauses bjoern's accepting: the worker does only
    the busy connections' reads, and a claim that waited in the queue is served once they
    close."""
    server = ServerProcess(
        redis_url, "--idle-timeout", "60", "--request-timeout", "60", preexec_fn=_nofile(96)
    )
    busy: list[socket.socket] = []
    stop = threading.Event()

    def drip():
        while not stop.wait(0.01):
            for sock in list(busy):
                try:
                    sock.send(b"x")
                except OSError:
                    busy.remove(sock)

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    waiting = None
    try:
        for _ in range(150):
            sock = server.connect()
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nX-Slow: ")  # and never finish
            busy.append(sock)
        worker = _worker_holding(server, 96)
        waiting = server.connect()
        waiting.sendall(_claim_request("waiting"))  # queued in the kernel behind the limit
        time.sleep(1.0)
        cpu = _cpu_per_s(worker)
        assert _descriptors(worker) == 96  # still at the limit: nothing was shed
        assert cpu < 0.3, f"worker at {cpu:.3f} CPU-s/s at its descriptor limit"
        stop.set()
        dripper.join(5)
        for sock in busy:
            sock.close()
        busy.clear()
        assert _claims_an_item(server, waiting, limit_s=15), "the queued claim was not served"
        waiting = None
        assert _claims_an_item(server)
        assert worker in children_of(server.process.pid)
    finally:
        stop.set()
        for sock in busy:
            sock.close()
        if waiting is not None:
            waiting.close()
        server.stop()
