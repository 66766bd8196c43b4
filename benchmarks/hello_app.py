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


class HelloRequest:
    def on_post(self, req, resp, project: str):
        req.bounded_stream.read()
        resp.content_type = falcon.MEDIA_JSON
        resp.data = b'{"item_name":"hello"}'


def create_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/{project}/request", HelloRequest())
    return app


def main() -> None:
    port, workers = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 2
    sock = bjoern.bind_and_listen("127.0.0.1", port, listen_backlog=4096)
    app = create_app()
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            bjoern.server_run(sock, app)
            os._exit(0)
        children.append(pid)

    def stop(*_):
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


if __name__ == "__main__":
    main()
