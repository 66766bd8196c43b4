"""What /metrics says of the node itself: Redis reachable, its round trip, clock and memory; the build.

Owns RedisProbe (one PING per scrape, INFO memory, the clock's offset from Redis's TIME) and
BuildInfo (tracker_build_info: version, Python, whether the hot path runs compiled). metrics.py
registers them beside the projects' figures.
"""

from __future__ import annotations

import platform
import time
from importlib import metadata

from prometheus_client.core import GaugeMetricFamily

from tracker_core.compiled import classify, protocol
from tracker_core.infra import redis_clock
from tracker_core.infra.rawredis import RedisError
from tracker_core.items import bloom_plan

_HOT_PATH_MODULES = (classify, protocol, bloom_plan)


def build_labels() -> dict[str, str]:
    """tracker_build_info's labels: the package version, Python's, and whether every hot-path
    module runs compiled (false when a twin stands in: pure mode or no build)."""
    try:
        version = metadata.version("tracker")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    compiled = all(module.COMPILED for module in _HOT_PATH_MODULES)
    return {"version": version, "python": platform.python_version(), "compiled": str(compiled).lower()}


class RedisProbe:
    """PING Redis once per scrape: whether it answers, in how many seconds, and its memory."""

    def __init__(self, conn):
        self.conn = conn
        self.rtt_s: float | None = None  # None: no answer

    def ping(self) -> RedisError | OSError | None:
        """PING Redis; the error when it did not answer, else None."""
        started = time.perf_counter()
        try:
            self.conn.execute_command("PING")
        except (RedisError, OSError) as exc:
            self.rtt_s = None
            return exc
        self.rtt_s = time.perf_counter() - started
        return None

    def collect(self):
        up = GaugeMetricFamily("tracker_redis_up", "1 when Redis answered this scrape's PING, else 0.")
        up.add_metric([], 0 if self.rtt_s is None else 1)
        yield up
        if self.rtt_s is None:
            return
        rtt = GaugeMetricFamily("tracker_redis_rtt_seconds", "Round trip of this scrape's PING to Redis.")
        rtt.add_metric([], self.rtt_s)
        yield rtt
        yield from self._memory()
        yield from self._clock()

    def _clock(self):
        """This node's wall clock against Redis's (tracker_core.infra.redis_clock), from its last sync."""
        clock = redis_clock.PROCESS_CLOCK
        try:
            clock.now(self.conn, checked=False)  # a TIME when due: the first scrape has a reading
        except (RedisError, OSError):
            pass
        if clock.offset_s is None:
            return
        offset = GaugeMetricFamily(
            "tracker_clock_offset_seconds",
            "This node's wall clock minus Redis's TIME; times are Redis's either way.",
        )
        offset.add_metric([], clock.offset_s)
        refusing = GaugeMetricFamily(
            "tracker_clock_refusing",
            "1 while this node refuses to serve: its clock is past --max-clock-offset from Redis's.",
        )
        refusing.add_metric([], 0 if clock.refusal is None else 1)
        yield from (offset, refusing)

    def _memory(self):
        try:
            info = self.conn.execute_command("INFO", "memory")
        except (RedisError, OSError):  # a topology without INFO here (a cluster): no gauges
            return
        fields = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)
        if "used_memory" not in fields:
            return
        used = GaugeMetricFamily("tracker_redis_memory_used_bytes", "Redis's used_memory.")
        used.add_metric([], int(fields["used_memory"]))
        limit = GaugeMetricFamily(
            "tracker_redis_memory_max_bytes", "Redis's maxmemory (0: no limit; writes fail beyond it)."
        )
        limit.add_metric([], int(fields.get("maxmemory", 0)))
        yield from (used, limit)


class BuildInfo:
    def __init__(self, labels: dict[str, str]):
        self.labels = labels

    def collect(self):
        info = GaugeMetricFamily(
            "tracker_build_info", "Always 1: the build in its labels.", labels=list(self.labels)
        )
        info.add_metric(list(self.labels.values()), 1)
        yield info
