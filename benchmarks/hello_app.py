"""A hello-world Falcon app on bjoern, forked like the tracker: the ceiling of the HTTP layer.

It answers POST /{project}/request with a fixed item after reading the body, so wrk drives it
with the same script and the same workers as the real server.

    .venv/bin/python benchmarks/hello_app.py PORT [WORKERS]
"""

from __future__ import annotations

import os
import signal
import sys

import bjoern
import falcon

from tracker_api.server import listening_sockets
from tracker_core import processes


class HelloRequest:
    def on_post(self, req, resp, project: str):
        req.bounded_stream.read()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = b'{"item_name":"hello"}'


def create_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/{project}/request", HelloRequest())
    return app


def _worker(sock, app) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    bjoern.server_run(sock, app)


def main() -> None:
    port, workers = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    # Each worker on its own socket, as tracker serve's workers are (server.listening_sockets).
    sockets = listening_sockets("127.0.0.1", port, workers)
    app = create_app()
    supervisor = processes.Supervisor()
    supervisor.stop_on_signals()
    for sock in sockets:
        supervisor.add("hello worker", lambda sock=sock: processes.fork(lambda: _worker(sock, app)))
    supervisor.run()


if __name__ == "__main__":
    main()
