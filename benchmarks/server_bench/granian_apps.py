"""The benchmark's apps as granian factories: granian calls one in each worker it starts.

    granian --interface wsgi --factory server_bench.granian_apps:tracker   (PYTHONPATH=benchmarks)

The tracker is built as `tracker serve` builds it in a bjoern worker (tracker_api.server.make_app:
its own Engine, so no Redis connection is shared), from TRACKER_REDIS_URL. bjoern's body cap and
connection guard are bjoern's own fixes and are left out: granian has its own.
"""

from __future__ import annotations

import os


def tracker():
    """The tracker's WSGI app for one granian worker."""
    from tracker_api.server import make_app
    from tracker_api.web.config import AppConfig

    return make_app(os.environ["TRACKER_REDIS_URL"], AppConfig())


def hello():
    """The hello-world Falcon app (server_bench/hello_app.py) for one granian worker."""
    from server_bench.hello_app import create_app

    return create_app()
