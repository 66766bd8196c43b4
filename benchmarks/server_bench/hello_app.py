"""A hello-world Falcon app on bjoern, forked like the tracker: the ceiling of the HTTP layer.

It answers POST /{project}/request with a fixed item after reading the body, so wrk drives it
with the same script and the same workers as the real server. Given REDIS_URL, each request also
makes one Redis round trip (PING, through the tracker's own client, tracker_core.infra.rawredis): the
floor of any request that asks Redis once, as a claim does.

    .venv/bin/python benchmarks/server_bench/hello_app.py PORT [WORKERS [REDIS_URL]]
"""

from __future__ import annotations

import os
import signal
import sys

import bjoern
import falcon

from tracker_api.server import listening_sockets
from tracker_core.infra import processes, topology
from tracker_core.infra.supervision import Supervisor


class HelloRequest:
    def __init__(self, redis_url: str | None = None):
        self.redis_url = redis_url
        self.conn = None  # opened in the worker on its first request (never across a fork)

    def on_post(self, req, resp, project: str):
        req.bounded_stream.read()
        if self.redis_url:
            if self.conn is None:
                self.conn = topology.connect(self.redis_url)
            self.conn.execute_command("PING")
        resp.content_type = falcon.MEDIA_JSON
        resp.data = b'{"item_name":"hello"}'


def create_app(redis_url: str | None = None) -> falcon.App:
    app = falcon.App()
    app.add_route("/{project}/request", HelloRequest(redis_url))
    return app


def _worker(sock, app) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    bjoern.server_run(sock, app)


def main() -> None:
    port, workers = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    redis_url = sys.argv[3] if len(sys.argv) > 3 else None
    # Each worker on its own socket, as tracker serve's workers are (server.listening_sockets).
    sockets = listening_sockets("127.0.0.1", port, workers)
    app = create_app(redis_url)
    supervisor = Supervisor()
    supervisor.stop_on_signals()
    for sock in sockets:
        supervisor.add("hello worker", lambda sock=sock: processes.fork(lambda: _worker(sock, app)))
    supervisor.run()


if __name__ == "__main__":
    main()
