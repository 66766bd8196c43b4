"""Serve the app with bjoern: one listening socket, N forked worker processes sharing it.

Each worker builds its own Engine after the fork, so no Redis connection is shared between
processes. The parent restarts a worker that dies and stops them all on SIGTERM or SIGINT.
"""
from __future__ import annotations

import os
import signal
import sys
import time

import bjoern

from tracker_api.app import create_app
from tracker_core.engine import Engine


def _worker(sock, redis_url: str, trust_forwarded: bool) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    app = create_app(Engine(redis_url), trust_forwarded=trust_forwarded)
    try:
        bjoern.server_run(sock, app)
    finally:
        os._exit(0)


def serve(redis_url: str, host: str, port: int, workers: int, trust_forwarded: bool = False,
          ready=None) -> None:
    """Bind HOST:PORT and run WORKERS bjoern processes until SIGTERM/SIGINT."""
    sock = bjoern.bind_and_listen(host, port, listen_backlog=4096)
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            _worker(sock, redis_url, trust_forwarded)
        children[pid] = slot

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in range(workers):
        spawn(slot)
    print(f"tracker: serving on http://{host}:{sock.getsockname()[1]} with {workers} "
          f"worker(s), Redis {redis_url}", file=sys.stderr, flush=True)
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
