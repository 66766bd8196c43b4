"""The renderer: the process that renders anonymous aggregates for the workers (public_cache.py).

Owns the loop of the process `tracker serve` forks beside its workers at a lower CPU priority:
it takes the keys the workers ask for on the store's socket and renders each, one at a time, whose
file is older than the max age, through the Falcon app itself (a request marked RENDERING_ENV, so
that the request metrics do not count it and the cache does not answer it).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import socket
import time
from collections import OrderedDict

from tracker_api.public.rendered_files import DEFAULT_MAX_AGE_S, MAX_KEY_CHARS, Store

log = logging.getLogger("tracker.public_cache")

MAX_PENDING = 10_000
RENDERER_NICE = 10
RENDERING_ENV = "tracker.rendering"  # set on the renderer's own requests
PROCESS_NAME = "tracker-render"  # its /proc/PID/comm, which tells it from the workers


def request_of(key: str) -> tuple[str, str, str]:
    """(path, query string, host) a key stands for."""
    path, query, host = key.split("\n", 2)
    return path, query, host


class Renderer:
    """The renderer's loop: render each key asked for whose file is older than MAX_AGE_S."""

    TRIM_EVERY_S = 10.0

    def __init__(self, store: Store, app, max_age_s: float = DEFAULT_MAX_AGE_S):
        self.store = store
        self.app = app  # the Falcon app: the routes without the warriors' hot path or this cache
        self.max_age_s = max_age_s
        self.pending: OrderedDict[str, None] = OrderedDict()
        self.sock: socket.socket | None = None
        self.trimmed_at = time.monotonic()
        self.renders = 0

    def bind(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.store.socket_path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.store.socket_path)
        self.sock.setblocking(False)

    def receive(self, timeout_s: float) -> None:
        """Take the asks waiting (waiting up to TIMEOUT_S for the first)."""
        sock = self.sock
        assert sock is not None, "bind() first"
        if timeout_s > 0 and not select.select([sock], [], [], timeout_s)[0]:
            return
        while len(self.pending) < MAX_PENDING:
            try:
                data = sock.recv(MAX_KEY_CHARS * 4 + 16)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                raise
            self.pending[data.decode("utf-8", "surrogateescape")] = None

    def step(self) -> bool:
        """Render the oldest pending key if it is due; whether one was taken."""
        if not self.pending:
            return False
        key, _ = self.pending.popitem(last=False)
        entry = self.store.read(key)
        if entry is None or time.monotonic() - entry.rendered_at > self.max_age_s:
            try:
                self.render(key)
            except OSError as exc:  # a full or failing disk: the workers serve what there is
                log.error("cannot write the rendered answer of %s: %s", key.split("\n", 1)[0], exc)
        return True

    def render(self, key: str) -> None:
        path, query, host = request_of(key)
        environ = {
            "REQUEST_METHOD": "GET",
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": _EMPTY,
            "wsgi.errors": _ERRORS,
            "wsgi.version": (1, 0),
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            RENDERING_ENV: True,
        }
        if host:
            environ["HTTP_HOST"] = host
        answer: list = []

        def start_response(status, headers, exc_info=None):
            answer[:] = [status, list(headers)]

        body = b"".join(self.app(environ, start_response))
        status, headers = answer
        self.store.write(key, status, headers, body)
        self.renders += 1

    def run_forever(self, warm: tuple[str, ...] = ()) -> None:
        """Serve asks until killed, having rendered WARM first (the keys no one should wait for)."""
        self.bind()
        with contextlib.suppress(OSError):
            os.nice(RENDERER_NICE)  # the warriors' workers first
        for key in warm:
            self.pending[key] = None
        while True:
            self.receive(0 if self.pending else 1.0)
            self.step()
            now = time.monotonic()
            if now - self.trimmed_at >= self.TRIM_EVERY_S:
                self.store.trim()
                self.trimmed_at = now


class _Empty:
    def read(self, size=-1):
        return b""


class _Errors:
    def write(self, text):
        log.error("%s", text.rstrip())

    def flush(self):
        pass


_EMPTY = _Empty()
_ERRORS = _Errors()
