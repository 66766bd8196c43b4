"""Refill on demand: offloaded queue items come back when claims need them, not at the next pass.

A pass of `tracker maintain` (every second by default) refills a queue below its low watermark;
a warrior draining faster than that found the queue empty while its items waited on disk (and a
seesaw warrior that gets a 404 sleeps a minute). So claims ask, and the lease holder answers:

- While segments of a shared queue wait on disk, the lease holder keeps the settings field
  REFILL_WATCH_FIELD at BELOW x 16 + QUEUES (`refill_watch-2.lua`): BELOW a queue size, QUEUES a
  bit per queue whose segments wait (QUEUE_BITS: 1 todo, 2 backfeed, 4 secondary, 8 redo).
- A claim that finds one of those queues under BELOW (empty included) deletes the field, so it
  asks once, and publishes the project's settings key on REFILL_CHANNEL (`claim-21.lua`). While
  the field is set that costs a claim one SCARD per watched queue; otherwise one HMGET field.
- The maintainer's refiller thread (`Refiller`), subscribed to the channel, refills that
  project's queues at once, then writes the field again. Its refills are the pass's own
  (`maintenance.balance_queues`' refill loop, `staging.refill_one`), under the same lease; the
  refill script refills only below the target it is given, so the two never take a queue past
  it between them, and each segment's refill holds the project's lock (`RefillDemand.lock`), so
  neither reads a file the other is deleting. One call to Redis comes before a claim's items
  are back: the refill script (`RefillDemand.sources` keeps the registry the last pass read).
- BELOW is each queue's refill target (`RefillDemand.target`): offload_low, or more while claims
  drain the queue fast, READ_AHEAD_S seconds of the drain rate the maintainer measures from the
  sizes it sees (`DrainMeter`); never so much that one more segment would take the queue past
  offload_high (the next pass would offload it again). The field holds the least target of the
  watched queues, so a queue a claim finds under it is one the maintainer refills.
- A message lost (the maintainer reconnecting, another maintainer's lease) costs at most a pass:
  every pass refills to the same targets and writes the field again.

Crash safety is refill_one's: a segment's file is deleted only after the refill script put its
items back into Redis. One lease holder moves a project's segments: the refiller is a thread of
the maintainer that holds the lease, and a refill without the lease is refused by the script.

A claim that finds the queue empty does not wait for the refill: a bjoern worker serves one
request at a time, so a claim waiting even a few milliseconds holds every connection of that
worker; the answer is the 404 it was, and the refill lands for the next claim.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker_core import keyspace, scripts
from tracker_core.offload.segment_registry import QUEUES
from tracker_core.scripts.constants import REFILL_WATCH_FIELD

READ_AHEAD_S = 2.0  # seconds of the measured drain a queue is refilled ahead (up to its ceiling)
RATE_WINDOW_S = 2.0  # the drain rate's smoothing: older observations weigh e^(-age / this)
LISTEN_TIMEOUT_S = 1.0  # the refiller looks at its stop event at least this often
RETRY_MAX_S = 30.0  # the refiller's longest back-off after a failure (Redis away)


def _queue_bits() -> dict[str, int]:
    """Each shared queue's bit in REFILL_WATCH_FIELD: claim-21.lua reads bit 1 as its KEYS[4],
    2 as KEYS[5] and so on to KEYS[7]."""
    k = keyspace.ProjectKeys("p")
    keys = scripts.claim.keys(k, downloader="d", now_ms=0)
    return {q: 1 << (keys.index(k.queue(q)) + 1 - 4) for q in QUEUES}


QUEUE_BITS = _queue_bits()


class DrainMeter:
    """How fast claims take items out of one queue, from the sizes the maintainer sees.

    Each observation compares the size with the last one, plus what the maintainer itself put
    in (or took out) since: what is missing went to claims. The rate is smoothed over about
    RATE_WINDOW_S; a queue that grows (items added) counts as not draining.
    """

    def __init__(self) -> None:
        self.at: float | None = None
        self.size = 0
        self.rate = 0.0  # items/s

    def observe(self, now: float, size: int) -> float:
        if self.at is not None and now > self.at:
            elapsed = now - self.at
            drained = max(0, self.size - size) / elapsed
            self.rate += (1 - math.exp(-elapsed / RATE_WINDOW_S)) * (drained - self.rate)
        self.at, self.size = now, size
        return self.rate

    def moved(self, n: int) -> None:
        """The maintainer put N items into the queue (or took -N out) since the last look."""
        self.size += n


@dataclass(frozen=True)
class Watch:
    """What REFILL_WATCH_FIELD should say: the least target of the queues whose segments wait."""

    below: int
    queues: tuple[str, ...]

    def value(self) -> str:
        """The field's text ('' when no queue is watched: the field goes)."""
        return str(self.below * 16 + sum(QUEUE_BITS[q] for q in self.queues)) if self.queues else ""


class RefillDemand:
    """What refill on demand keeps across passes: a drain meter per project and queue, the
    targets last computed, and the lock per project that the pass and the refiller share."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.meters: dict[tuple[str, str], DrainMeter] = {}
        self.targets: dict[tuple[str, str], int] = {}
        # project -> its segment registry as the last pass read it, kept right by every refill
        # since: the refiller starts from it (a call fewer before a claim's items are back).
        self.sources: dict[str, dict[int, str]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, project: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(project, threading.Lock())

    def target(
        self, project: str, queue: str, size: int | None, high: int, low: int, per_segment: int
    ) -> int:
        """The size QUEUE of PROJECT (now SIZE; None: not counted, the rate as last measured)
        is refilled up to: LOW, or READ_AHEAD_S of its measured drain, but at most where one
        more segment still fits under HIGH."""
        meter = self.meters.setdefault((project, queue), DrainMeter())
        rate = meter.rate if size is None else meter.observe(self.clock(), size)
        ceiling = max(low, high - per_segment)
        wanted = max(low, min(ceiling, math.ceil(rate * READ_AHEAD_S)))
        self.targets[(project, queue)] = wanted
        return wanted

    def moved(self, project: str, queue: str, n: int) -> None:
        meter = self.meters.get((project, queue))
        if meter is not None:
            meter.moved(n)

    def watch(
        self, k: keyspace.ProjectKeys, sources: dict[int, str], high: int, low: int, skip: set
    ) -> Watch:
        """What claims of K should ask at: the queues with segments waiting (SOURCES, the
        registry, less SKIP: segments whose file cannot be read, which no refill brings back),
        and their least target. None while offloading is off (high 0): every pass refills
        every segment then."""
        if high == 0:
            return Watch(0, ())
        waiting = {q for n, q in sources.items() if q in QUEUE_BITS and n not in skip}
        queues = tuple(q for q in QUEUES if q in waiting)
        name = k.tag[1:-1]  # the project's name, or PROJECT.I[.SALT] for a further shard
        below = min((self.targets.get((name, q), low) for q in queues), default=0)
        return Watch(below, queues)

    def forget(self, project: str) -> None:
        """Drop what is kept of PROJECT (deleted), its further shards' (PROJECT.I...) too."""

        def of(name: str) -> bool:
            return name == project or name.startswith(project + ".")

        for key in [key for key in self.meters if of(key[0])]:
            self.meters.pop(key, None)
            self.targets.pop(key, None)
        for name in [name for name in self.sources if of(name)]:
            self.sources.pop(name, None)


def write_watch(client, k: keyspace.ProjectKeys, lease, watch: Watch) -> bool:
    """Set K's REFILL_WATCH_FIELD to WATCH's value unless it holds it already (a pass would
    otherwise write the settings hash every second): True when written."""
    value = watch.value()
    if (client.hget(k.settings, REFILL_WATCH_FIELD) or "") == value:
        return False
    reply = lease.checked(scripts.refill_watch(client, k, holder=lease.holder, value=value))
    return reply == scripts.refill_watch.codes.SET


class Refiller:
    """The maintainer's second thread: waits on REFILL_CHANNEL and calls SERVE(project) for each
    project whose claims asked, within milliseconds of the ask.

    Asks that arrive while it serves are taken together afterwards, each project once. A
    failure (Redis away) is logged in one line and the subscription made again after a back-off.
    An ask published while no subscription was up is lost, and the claim that made it took the
    watch away, so no claim asks again: once subscribed, it serves every project of KNOWN()
    (those the maintainer passed over) as if each had asked.
    """

    def __init__(
        self,
        client,
        serve: Callable[[str], object],
        stop: threading.Event,
        known: Callable[[], list[str]] = list,
        log: Callable[[str], object] | None = None,
    ) -> None:
        self.client = client
        self.serve = serve
        self.stop = stop
        self.known = known
        self.log = log or logging.getLogger("tracker.maintain").warning
        self.thread = threading.Thread(target=self.run, name="tracker-refiller", daemon=True)

    def start(self) -> Refiller:
        self.thread.start()
        return self

    def run(self) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                self._listen()
            except Exception as exc:  # noqa: BLE001 - the thread must outlive Redis restarts
                failures += 1
                delay = min(RETRY_MAX_S, 0.1 * 2**failures)
                line = f"{type(exc).__name__}: {exc}".splitlines()[0]
                self.log(f"refill channel: {line}; again in {delay:.1f}s")
                self.stop.wait(delay)
            else:
                failures = 0

    def _listen(self) -> None:
        pubsub = self.client.pubsub()
        try:
            pubsub.subscribe(keyspace.REFILL_CHANNEL)
            while not self.stop.is_set():
                message = pubsub.get_message(timeout=LISTEN_TIMEOUT_S)
                asked: set[str] = set()
                while message is not None:
                    if message.get("type") == "subscribe":  # Redis has the subscription now
                        asked.update(self.known())
                    elif message.get("type") == "message":
                        project = keyspace.project_of_settings(str(message["data"]))
                        if project is not None:
                            asked.add(project)
                    message = pubsub.get_message(timeout=0)
                for project in sorted(asked):
                    self.serve(project)
        finally:
            with contextlib.suppress(Exception):
                pubsub.close()
