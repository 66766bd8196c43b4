"""One clock for every node: Redis's ``TIME``, read now and then and carried forward by this
process's monotonic clock.

Every decision a script makes from "now" (claim times, when a claim may be reclaimed, rate
limits, minute buckets, heartbeats, offload times) takes that "now" in ARGV from its caller
(docs/data-model.md, "One clock"). Taken from each node's own wall clock, a node running hours
fast handed out every claim another node had just made as reclaimable, and one running slow made
its own claims reclaimable at once. So the time comes from Redis: a process asks Redis for
``TIME`` at most every ``RESYNC_S`` and adds the monotonic time passed since, which a step of the
node's wall clock (NTP, an operator's ``date -s``) does not move. The cost is one round trip per
``RESYNC_S`` per process.

The node's own wall clock is still measured against it (``offset_s``: local minus Redis), because
logs, file times and people read it. Past ``max_offset_s`` (``--max-clock-offset``, 0: no bound)
the node refuses to serve: ``now()`` raises ``ClockRefused`` with the reason, which the web app
answers 503 and ``/healthz`` names, once logged; ``tracker_clock_offset_seconds`` exports the
offset. docs/operations.md, "Clocks", says what is assumed.

A test passes its own settable clock to the Engine instead; module-level callers take the
process's clock through ``now_ms(conn)``.
"""

from __future__ import annotations

import logging
import os
import time

log = logging.getLogger("tracker.clock")

RESYNC_S = 10.0  # a monotonic clock drifts some ppm: 10 s of it is microseconds
MAX_OFFSET_ENV = "TRACKER_MAX_CLOCK_OFFSET"
DEFAULT_MAX_OFFSET_S = 60.0
WARN_OFFSET_S = 1.0  # logged once past this, well before the refusal


class ClockRefused(Exception):
    """This node's wall clock is further from Redis's than the bound allows."""


def max_offset_from_env() -> float:
    """The bound a process starts with: TRACKER_MAX_CLOCK_OFFSET seconds (0: none), or 60."""
    text = os.environ.get(MAX_OFFSET_ENV, "")
    try:
        value = float(text) if text else DEFAULT_MAX_OFFSET_S
    except ValueError:
        return DEFAULT_MAX_OFFSET_S
    return value if value >= 0 else DEFAULT_MAX_OFFSET_S


class RedisClock:
    """Redis's time in seconds, for one process (not thread-safe: the hot path has one thread).

    ``sync(conn)`` reads ``TIME``; ``now(conn)`` returns Redis's time, syncing through CONN first
    when ``RESYNC_S`` passed. CONN is any client with ``execute_command`` (RawRedis, the
    topology clients, redis-py).
    """

    def __init__(
        self,
        max_offset_s: float | None = None,
        resync_s: float = RESYNC_S,
        wall=time.time,
        monotonic=time.monotonic,
    ):
        self.max_offset_s = max_offset_from_env() if max_offset_s is None else max_offset_s
        self.resync_s = resync_s
        self._wall = wall
        self._monotonic = monotonic
        self._redis_at = 0.0  # Redis's time at _monotonic_at
        self._monotonic_at = 0.0
        self._due = float("-inf")  # monotonic time of the next sync
        self.offset_s: float | None = None  # this node's wall clock minus Redis's
        self.uncertainty_s = 0.0  # half the round trip of the last sync
        self.refusal: str | None = None
        self._warned = False

    def sync(self, conn) -> None:
        before = self._monotonic()
        wall = self._wall()
        seconds, micros = conn.execute_command("TIME")
        after = self._monotonic()
        redis_s = int(seconds) + int(micros) / 1e6
        # Redis read its clock somewhere within the round trip; the middle is the best guess.
        half = (after - before) / 2
        self._redis_at, self._monotonic_at = redis_s, before + half
        self.uncertainty_s = half
        self.offset_s = offset_s = wall + half - redis_s
        self._due = after + self.resync_s
        self._judge(offset_s)

    def _judge(self, offset_s: float) -> None:
        """Refuse to serve, or serve again, or warn, for a clock OFFSET_S off Redis's."""
        offset = abs(offset_s)
        refusal = None
        if self.max_offset_s and offset > self.max_offset_s:
            refusal = (
                f"this node's clock is {offset_s:+.1f} s off Redis's (bound "
                f"{self.max_offset_s:g} s, --max-clock-offset): fix its time sync"
            )
        if refusal != self.refusal:
            if refusal:
                log.error("refusing to serve: %s", refusal)
            elif self.refusal:
                log.warning("serving again: clock %+.3f s off Redis's, within the bound", offset_s)
            self.refusal = refusal
        if offset > WARN_OFFSET_S and not self._warned and refusal is None:
            log.warning("this node's clock is %+.3f s off Redis's; Redis's time is used", offset_s)
        self._warned = offset > WARN_OFFSET_S

    def now(self, conn, checked: bool = True) -> float:
        """Redis's time now (seconds); ClockRefused past the bound (unless not CHECKED: what the
        metrics read to report on the node), RedisError when a due sync fails."""
        monotonic = self._monotonic()
        if monotonic >= self._due:
            self.sync(conn)
            monotonic = self._monotonic()
        if checked and self.refusal is not None:
            raise ClockRefused(self.refusal)
        return self._redis_at + (monotonic - self._monotonic_at)

    def status(self) -> dict:
        """What /healthz and /metrics show: offset, its uncertainty, the bound, the refusal."""
        return {
            "offset_s": self.offset_s,
            "uncertainty_s": self.uncertainty_s,
            "max_offset_s": self.max_offset_s,
            "refusal": self.refusal,
        }


# The process's clock: one per process, whatever Redis connection asks (a process serves one
# deployment; in a Cluster every primary's TIME is on the same synchronised time).
PROCESS_CLOCK = RedisClock()


def configure(max_offset_s: float) -> None:
    """Set this process's bound (the CLI's --max-clock-offset; 0: none)."""
    PROCESS_CLOCK.max_offset_s = max_offset_s
    if PROCESS_CLOCK.offset_s is not None:
        PROCESS_CLOCK._judge(PROCESS_CLOCK.offset_s)


def now_ms(conn, checked: bool = True) -> int:
    """Redis's time in milliseconds, by the process's clock, syncing through CONN when due;
    unless not CHECKED (a read that decides nothing), ClockRefused past the bound."""
    return int(PROCESS_CLOCK.now(conn, checked) * 1000)


class ConnectionClock:
    """The process's clock as a no-argument callable over CONN: an Engine's default clock."""

    def __init__(self, conn, clock: RedisClock = PROCESS_CLOCK):
        self.conn = conn
        self.clock = clock

    def __call__(self) -> float:
        return self.clock.now(self.conn)
