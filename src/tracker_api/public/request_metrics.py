"""Per-route request durations and status counts, summed over every bjoern worker.

Each worker is its own process, so the counts live in prometheus-client's multiprocess files: the
server's parent makes a fresh directory per run before it forks (``multiprocess_directory``), each
worker writes its own files there, and whichever worker answers /metrics sums them all
(``collect_into``). A worker that dies leaves its counts in place (a counter never goes back);
``marking_dead`` does the library's bookkeeping for it. Without a directory (tests driving
create_app, `tracker` commands) each app keeps its counts in its own registry.

Routes are labelled by their template (``/{project}/request``), never by the path, and methods
outside the HTTP verbs as "other": a scan of a million paths adds no series.

This runs on every request: a request adds to plain numbers of its (route, method, status) and
a flush moves them into the metrics (RequestMetrics; the request_metrics
benchmark case measures what it costs).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess, values

from tracker_api.public.public_renderer import RENDERING_ENV
from tracker_core.infra import processes

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
_PREFIX = "tracker-metrics-"  # + the server's pid + "-" + a unique part, under the temp directory
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
    processes long gone would be summed in) and kept; otherwise a fresh one is made and removed
    (and those of servers killed before they could remove theirs). The workers find it in the
    environment they inherit.
    """
    given = multiprocess_directory()
    if given:
        os.makedirs(given, exist_ok=True)
        for stale in glob.glob(os.path.join(given, "*.db")):
            os.remove(stale)
        return given, lambda: None
    remove_orphaned_directories()
    made = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
    os.environ[MULTIPROC_ENV] = made

    def cleanup() -> None:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(made, ignore_errors=True)

    return made, cleanup


def remove_orphaned_directories() -> list[str]:
    """Remove the directories of servers that are gone without removing theirs (killed -9).

    Each is named after its server's pid: one whose pid no longer runs is an orphan (a reused pid
    only keeps an orphan a while longer)."""
    removed = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{_PREFIX}*-*")):
        pid = os.path.basename(path)[len(_PREFIX) :].partition("-")[0]
        if pid.isdigit() and not processes.alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


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


class _Series:
    """One (route, method, status)'s counts as this process took them, and how much of them has
    reached the metrics. Only the request thread adds to the counts and only a flush (under
    RequestMetrics' lock) moves the flushed figures, so neither ever loses the other's writes."""

    __slots__ = (
        "count",
        "sum_s",
        "buckets",
        "flushed_count",
        "flushed_sum_s",
        "flushed_buckets",
        "counter",
        "histogram",
    )

    def __init__(self, counter, histogram):
        self.count = 0
        self.sum_s = 0.0
        self.buckets = [0] * (len(DURATION_BUCKETS_S) + 1)  # the last: +Inf
        self.flushed_count = 0
        self.flushed_sum_s = 0.0
        self.flushed_buckets = [0] * len(self.buckets)
        self.counter = counter
        self.histogram = histogram

    def flush(self) -> None:
        count, sum_s, buckets = self.count, self.sum_s, list(self.buckets)
        if count != self.flushed_count:
            self.counter.inc(count - self.flushed_count)
            self.flushed_count = count
        if sum_s != self.flushed_sum_s:
            # A histogram child's own parts (prometheus-client 0.26: _sum and per-bucket _buckets
            # values, not cumulative): observe() takes one value, a flush adds many at once.
            self.histogram._sum.inc(sum_s - self.flushed_sum_s)
            self.flushed_sum_s = sum_s
        for i, n in enumerate(buckets):
            if n != self.flushed_buckets[i]:
                self.histogram._buckets[i].inc(n - self.flushed_buckets[i])
                self.flushed_buckets[i] = n


class RequestMetrics:
    """Falcon middleware counting every response by route template, method and status.

    A request only adds to plain numbers in the process (prometheus-client's inc and observe
    cost about 5 us a request in the multiprocess files: a sixth of the worker's whole budget);
    ``flush`` moves them into the metrics. It runs on every scrape of this process and, in a
    worker, every FLUSH_EVERY_S from a thread, so another worker's scrape is at most that late.
    A worker killed between two flushes loses what it counted since the last one.
    """

    FLUSH_EVERY_S = 1.0

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
        self._series: dict[tuple, _Series] = {}
        self._lock = threading.Lock()
        if directory:
            threading.Thread(target=self._flush_forever, name="request-metrics", daemon=True).start()

    def process_request(self, req, resp) -> None:
        req.context.metrics_started = time.perf_counter()

    def process_response(self, req, resp, resource, req_succeeded) -> None:
        started = getattr(req.context, "metrics_started", None)
        if started is None or req.env.get(RENDERING_ENV):  # refused before it ran; a render
            return
        self.observe(req.uri_template, req.method, resp.status_code, time.perf_counter() - started)

    def observe(self, template: str | None, method: str, status: int, elapsed: float) -> None:
        """Count one response to route TEMPLATE (None: unrouted) that took ELAPSED seconds."""
        if method not in METHODS:  # keeps the cache bounded too, whatever methods are sent
            method = "other"
        key = (template, method, status)
        series = self._series.get(key)
        if series is None:
            series = self._new_series(*key)
        series.count += 1
        series.sum_s += elapsed
        series.buckets[bisect_left(DURATION_BUCKETS_S, elapsed)] += 1

    def _new_series(self, template, method, status) -> _Series:
        route = template or UNROUTED
        with self._lock:  # labels() and the dict, against a flush iterating it
            series = self._series[(template, method, status)] = _Series(
                self.requests.labels(route, method, str(status)), self.duration.labels(route, method)
            )
        return series

    def flush(self) -> None:
        """Move what this process counted since the last flush into the metrics."""
        with self._lock:
            for series in list(self._series.values()):
                series.flush()

    def _flush_forever(self) -> None:
        while True:
            time.sleep(self.FLUSH_EVERY_S)
            self.flush()

    def collect_into(self, registry: CollectorRegistry) -> None:
        """Add every worker's counts (or this app's own, without a directory) to REGISTRY."""
        self.flush()
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
