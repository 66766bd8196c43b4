"""Per-route request durations and status counts, summed over every bjoern worker.

Each worker is its own process, so the counts live in prometheus-client's multiprocess files: the
server's parent makes a fresh directory per run before it forks (``multiprocess_directory``), each
worker writes its own files there, and whichever worker answers /metrics sums them all
(``collect_into``). A worker that dies leaves its counts in place (a counter never goes back);
``marking_dead`` does the library's bookkeeping for it. Without a directory (tests driving
create_app, `tracker` commands) each app keeps its counts in its own registry.

Routes are labelled by their template (``/{project}/request``), never by the path, and methods
outside the HTTP verbs as "other": a scan of a million paths adds no series.

This runs on every request: the middleware caches each (route, method, status) series' children
so a request costs two dictionary lookups, a clock read and the two writes
(benchmarks/request_metrics_bench.py measures it).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, values

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
UNROUTED = "unrouted"  # every path no route matches: one label, however many paths are tried
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
# The hot path answers in well under a millisecond; admin item loads take seconds.
DURATION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def multiprocess_directory() -> str | None:
    """The directory the workers share, from the environment (None: counts stay per process)."""
    return os.environ.get(MULTIPROC_ENV) or None


def prepare_multiprocess_directory() -> tuple[str, Callable[[], None]]:
    """Before forking the workers: a directory for their counts, and what removes it at the end.

    A directory given in PROMETHEUS_MULTIPROC_DIR is emptied of an earlier run's files (counts of
    processes long gone would be summed in) and kept; otherwise a fresh one is made and removed.
    The workers find it in the environment they inherit.
    """
    given = multiprocess_directory()
    if given:
        os.makedirs(given, exist_ok=True)
        for stale in glob.glob(os.path.join(given, "*.db")):
            os.remove(stale)
        return given, lambda: None
    made = tempfile.mkdtemp(prefix="tracker-metrics-")
    os.environ[MULTIPROC_ENV] = made

    def cleanup() -> None:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(made, ignore_errors=True)

    return made, cleanup


def marking_dead(spawn: Callable[[], int]) -> Callable[[], int]:
    """SPAWN (start a worker, return its pid) that first marks the worker it replaces as dead.

    The supervisor calls SPAWN again only after the previous worker died, so the previous pid is
    the dead one.
    """
    previous: list[int] = []

    def spawn_again() -> int:
        directory = multiprocess_directory()
        if previous and directory:
            multiprocess.mark_process_dead(previous.pop(), directory)
        previous[:] = [spawn()]
        return previous[0]

    return spawn_again


def _use_multiprocess_values() -> None:
    """Make metrics built from now on write to the shared files.

    prometheus-client picks its value class when it is first imported, and the app imports it
    before the server's parent sets the directory: switch it here, in the worker, before the
    first metric is built.
    """
    if values.ValueClass is values.MutexValue:
        values.ValueClass = values.MultiProcessValue()


class RequestMetrics:
    """Falcon middleware counting every response by route template, method and status."""

    def __init__(self, directory: str | None = None):
        self.directory = directory
        if directory:
            _use_multiprocess_values()
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "tracker_http_requests",
            "HTTP responses by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "tracker_http_request_duration_seconds",
            "Time from the request reaching the app to its response, by route template and method.",
            ["route", "method"],
            buckets=DURATION_BUCKETS_S,
            registry=self.registry,
        )
        self._series: dict[tuple, tuple] = {}

    def process_request(self, req, resp) -> None:
        req.context.metrics_started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        started = getattr(req.context, "metrics_started", None)
        if started is None:  # refused before process_request ran
            return
        elapsed = time.perf_counter() - started
        method = req.method
        if method not in METHODS:  # keeps the cache bounded too, whatever methods are sent
            method = "other"
        key = (req.uri_template, method, resp.status_code)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = self._children(*key)
        series[0].inc()
        series[1].observe(elapsed)

    def _children(self, template, method, status) -> tuple:
        route = template or UNROUTED
        return (
            self.requests.labels(route, method, str(status)),
            self.duration.labels(route, method),
        )

    def collect_into(self, registry: CollectorRegistry) -> None:
        """Add every worker's counts (or this app's own, without a directory) to REGISTRY."""
        if self.directory:
            multiprocess.MultiProcessCollector(registry, self.directory)
        else:
            registry.register(_Forward(self.registry))


class _Forward:
    """A collector yielding another registry's families (so /metrics builds one registry)."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry

    def collect(self):
        return self.registry.collect()
