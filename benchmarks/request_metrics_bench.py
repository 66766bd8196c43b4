"""What per-route request metrics (tracker_api.request_metrics) cost a worker per request.

Drives one Falcon app answering at the hot path's route template (``/{project}/request``, a
resource that does no work, so the middleware's share is not hidden behind Redis) straight
through WSGI, without the middleware and with it, in alternating rounds, and takes the process
CPU time per request. With it twice: counts in the process (what tests and one-process tools
use) and in prometheus-client's multiprocess files (what every `tracker serve` worker does).
Writes benchmarks/results/request_metrics.json. Bounded: a few seconds in all.

    .venv/bin/python benchmarks/request_metrics_bench.py
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path

import falcon
import prometheus_client
from falcon import testing

from tracker_api import request_metrics

REQUESTS_PER_ROUND = 20_000
ROUNDS = 11
RESULTS = Path(__file__).with_name("results") / "request_metrics.json"


class Answer:
    def on_post(self, req, resp, project):
        resp.media = {"items": []}


def make_app(middleware: list):
    app = falcon.App(middleware=middleware)
    app.add_route("/{project}/request", Answer())
    return app


def cpu_us_per_request(app) -> float:
    environ = testing.create_environ(method="POST", path="/proj/request", body=b"")

    def start_response(status, headers, exc_info=None):
        return None

    start = time.process_time()
    for _ in range(REQUESTS_PER_ROUND):
        for _chunk in app(dict(environ), start_response):
            pass
    return (time.process_time() - start) / REQUESTS_PER_ROUND * 1e6


def methods_us_per_request(middleware: request_metrics.RequestMetrics) -> float:
    """The middleware's own two calls on one routed request, without the rest of Falcon."""
    app = make_app([])
    req = testing.create_req(method="POST", path="/proj/request")
    req.uri_template = "/{project}/request"  # what Falcon's router sets
    resp = falcon.Response()
    start = time.process_time()
    for _ in range(REQUESTS_PER_ROUND):
        middleware.process_request(req, resp)
        middleware.process_response(req, resp, app, True)
    return (time.process_time() - start) / REQUESTS_PER_ROUND * 1e6


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        apps = {
            "without metrics": make_app([]),
            "in-process counts": make_app([request_metrics.RequestMetrics()]),
        }
        # The workers' mode, last: switching to the shared files is for the rest of the process.
        os.environ[request_metrics.MULTIPROC_ENV] = directory
        apps["multiprocess files (bjoern workers)"] = make_app([request_metrics.RequestMetrics(directory)])
        for app in apps.values():  # warm: the series caches, the files' first pages
            cpu_us_per_request(app)
        cpu: dict[str, list[float]] = {name: [] for name in apps}
        alone: list[float] = []
        workers_middleware = request_metrics.RequestMetrics(directory)
        for _ in range(ROUNDS):
            for name, app in apps.items():
                cpu[name].append(cpu_us_per_request(app))
            alone.append(methods_us_per_request(workers_middleware))
        workers_middleware.flush()
    base = median(cpu["without metrics"])
    result = {
        "what": "worker CPU (process_time) per request through Falcon's WSGI app, a route that does no work",
        "requests_per_round": REQUESTS_PER_ROUND,
        "rounds": ROUNDS,
        "cpu_us_per_request": {name: [round(x, 2) for x in values] for name, values in cpu.items()},
        "median_cpu_us_per_request": {name: round(median(values), 2) for name, values in cpu.items()},
        "whole_app_difference_us_per_request (noisy)": {
            name: round(median(values) - base, 2) for name, values in cpu.items() if name != "without metrics"
        },
        "middleware_methods_alone_us_per_request (multiprocess)": round(median(alone), 2),
        "note": (
            "2 shared cores: rounds vary by a few us, so the difference of the whole-app medians is "
            "noisy; the methods alone (process_request + process_response, counts flushed later) "
            "are the steady figure, to which Falcon adds about 1 us for running any middleware at "
            "all. Issue 16 aims at 30 us of worker CPU per claim in all."
        ),
        "python": platform.python_version(),
        "falcon": falcon.__version__,
        "prometheus_client": prometheus_client.__version__
        if hasattr(prometheus_client, "__version__")
        else "",
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["median_cpu_us_per_request"], indent=2))
    print(json.dumps(result["whole_app_difference_us_per_request (noisy)"], indent=2))
    print("methods alone:", result["middleware_methods_alone_us_per_request (multiprocess)"], "us")


if __name__ == "__main__":
    main()
