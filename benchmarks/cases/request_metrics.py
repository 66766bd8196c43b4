"""What per-route request metrics (tracker_api.public.request_metrics) cost a worker per request.

Drives one Falcon app answering at the hot path's route template (``/{project}/request``, a
resource that does no work, so the middleware's share is not hidden behind Redis) straight
through WSGI, without the middleware and with it, in alternating rounds, and takes the process
CPU time per request. With it twice: counts in the process (what tests and one-process tools
use) and in prometheus-client's multiprocess files (what every `tracker serve` worker does).
A few seconds in all (results/request_metrics.json).
"""

from __future__ import annotations

import os
import time

import falcon
import prometheus_client
from falcon import testing

from harness import Bench, case
from tracker_api.public import request_metrics


class Answer:
    def on_post(self, req, resp, project):
        resp.media = {"items": []}


def make_app(middleware: list):
    app = falcon.App(middleware=middleware)
    app.add_route("/{project}/request", Answer())
    return app


def cpu_us_per_request(app, requests: int) -> float:
    environ = testing.create_environ(method="POST", path="/proj/request", body=b"")

    def start_response(status, headers, exc_info=None):
        return None

    start = time.process_time()
    for _ in range(requests):
        for _chunk in app(dict(environ), start_response):
            pass
    return (time.process_time() - start) / requests * 1e6


def methods_us_per_request(middleware: request_metrics.RequestMetrics, requests: int) -> float:
    """The middleware's own two calls on one routed request, without the rest of Falcon."""
    app = make_app([])
    req = testing.create_req(method="POST", path="/proj/request")
    req.uri_template = "/{project}/request"  # what Falcon's router sets
    resp = falcon.Response()
    start = time.process_time()
    for _ in range(requests):
        middleware.process_request(req, resp)
        middleware.process_response(req, resp, app, True)
    return (time.process_time() - start) / requests * 1e6


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


@case("request_metrics")
def run(bench: Bench) -> dict:
    """Worker CPU per request of the per-route request metrics."""
    requests = bench.size("requests", 20_000, quick=500)
    rounds = bench.size("rounds", 11, quick=3)
    directory = str(bench.tmp)
    apps = {
        "without metrics": make_app([]),
        "in-process counts": make_app([request_metrics.RequestMetrics()]),
    }
    # The workers' mode, last: switching to the shared files is for the rest of the process.
    os.environ[request_metrics.MULTIPROC_ENV] = directory
    apps["multiprocess files (bjoern workers)"] = make_app([request_metrics.RequestMetrics(directory)])
    for app in apps.values():  # warm: the series caches, the files' first pages
        cpu_us_per_request(app, requests)
    cpu: dict[str, list[float]] = {name: [] for name in apps}
    alone: list[float] = []
    workers_middleware = request_metrics.RequestMetrics(directory)
    for _ in range(rounds):
        for name, app in apps.items():
            cpu[name].append(cpu_us_per_request(app, requests))
        alone.append(methods_us_per_request(workers_middleware, requests))
    workers_middleware.flush()
    base = median(cpu["without metrics"])
    result = {
        "what": "worker CPU (process_time) per request through Falcon's WSGI app, a route that does no work",
        "requests_per_round": requests,
        "rounds": rounds,
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
        "falcon": falcon.__version__,
        "prometheus_client": prometheus_client.__version__
        if hasattr(prometheus_client, "__version__")
        else "",
    }
    result["headline"] = {
        "middleware_us_per_request": result["middleware_methods_alone_us_per_request (multiprocess)"]
    }
    return result
