"""Serve the app with bjoern: one listening socket, N forked worker processes sharing it.

Each worker builds its own Engine after the fork, so no Redis connection is shared between
processes. The parent restarts a worker that dies and stops them all on SIGTERM or SIGINT; a
worker whose parent dies (even by `kill -9`) exits too, so no orphan keeps the port.

bjoern has no timeouts, no body cap and spins on EMFILE: each worker runs it with bodies capped
as they are buffered (bodycap.py) and a guard thread beside it (connguard.py).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass

import bjoern

from tracker_api import bodycap, redact
from tracker_api.app import create_app
from tracker_api.connguard import ConnectionGuard, raise_nofile_limit
from tracker_core.embedded import die_with_parent
from tracker_core.engine import Engine

# The largest body any route takes (an admin item list as text, 64 MB) plus its form framing.
DEFAULT_MAX_BODY_BYTES = (64 << 20) + (64 << 10)


@dataclass(frozen=True)
class Limits:
    """What a worker gives a connection: seconds of silence, seconds per request, body bytes."""

    idle_timeout_s: float = 30.0
    request_timeout_s: float = 60.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_budget_bytes: int = 2 * DEFAULT_MAX_BODY_BYTES  # all unfinished bodies of a worker


def _worker(sock, redis_url: str, trust_forwarded: bool, limits: Limits, parent: int) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(0)
    app = create_app(Engine(redis_url), trust_forwarded=trust_forwarded)
    guard = ConnectionGuard(
        sock, limits.idle_timeout_s, limits.request_timeout_s, limits.max_body_bytes
    ).start()
    try:
        bodycap.run_capped(sock, app, limits.max_body_bytes, limits.body_budget_bytes, guard)
    finally:
        os._exit(0)


def serve(
    redis_url: str,
    host: str,
    port: int,
    workers: int,
    trust_forwarded: bool = False,
    ready=None,
    limits: Limits = Limits(),
) -> None:
    """Bind HOST:PORT and run WORKERS bjoern processes until SIGTERM/SIGINT."""
    redact.install()
    raise_nofile_limit()
    parent = os.getpid()
    sock = bjoern.bind_and_listen(host, port, listen_backlog=4096)
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            _worker(sock, redis_url, trust_forwarded, limits, parent)
        children[pid] = slot

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in range(workers):
        spawn(slot)
    print(
        f"tracker: serving on http://{host}:{sock.getsockname()[1]} with {workers} "
        f"worker(s), Redis {redact.redact(redis_url)}",
        file=sys.stderr,
        flush=True,
    )
    if ready is not None:
        ready()
    while not stopping:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.2)
            continue
        slot = children.pop(pid, None)
        if slot is not None and not stopping:
            print(f"tracker: worker {pid} exited ({status}); restarting", file=sys.stderr, flush=True)
            spawn(slot)
    for pid in list(children):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in list(children):
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    sock.close()
