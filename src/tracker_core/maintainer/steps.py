"""The named steps of a maintenance pass over one project (tracker_core.maintainer.maintenance runs
them, in order, under the project's lease), and what they share: the `ProjectPass`.

1. recover_unfinished: put back the items of an offload that a dead maintainer left staged;
2. remove_stale_files: delete unregistered segment files (first pass, then every CLEANUP_EVERY_S);
3. balance_queues: offload each shared queue down to offload_high, or refill it from its own
   segments while below offload_low (everything, with offloading off);
4. offload_done: with done_mode=offload, `done` beyond done_offload_high to segment files;
5. archive_done_log: the done log's entries beyond log_maxlen to files (tracker_core.donelog.log_archive);
6. reclassify_changed: queued items that a new or changed limit matches go to its sub-queue;
7. upkeep_stats: roll-ups and backlog samples (every STATS_EVERY_S).

Steps 1-5 move segments (OFFLOAD_STEPS, what `maintain_project` runs); a lost lease ends the
pass at the step that found it, with "lease_lost" in the report (nothing half-done counts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import redis
import zstandard

from tracker_core import keyspace, scripts
from tracker_core.donelog import log_archive
from tracker_core.figures import stats
from tracker_core.infra import redis_clock
from tracker_core.offload.demand import RefillDemand, write_watch
from tracker_core.offload.lease import Lease, LeaseLost
from tracker_core.offload.segment_registry import (
    DONE,
    QUEUES,
    STAGED_FIELD,
    OffloadError,
    segment_sources,
    source_key,
)
from tracker_core.offload.staging import STALE_FILE_S, cleanup_files, offload_one, recover, refill_one
from tracker_core.project import pattern_limits, settings_schema
from tracker_core.project.shard_layout import SHARD_TAGS_FIELD, ShardLayout

CLEANUP_EVERY_S = STALE_FILE_S
# A project's own trouble (a full disk, a corrupt file, a refused script): reported for it, and
# the maintainer goes on with the next; trouble with Redis itself propagates.
PROJECT_ERRORS = (OSError, zstandard.ZstdError, scripts.ScriptError, OffloadError)
STATS_EVERY_S = 60  # statistics upkeep (roll-ups, backlog samples) per project
DONE_HIGH_DEFAULT = 100_000


@dataclass(frozen=True)
class Watermarks:
    """A project's offload settings, read once per pass: the queue watermarks as
    settings.offload_rules gives them (safe stand-ins for stored ones that could strand items,
    which PROBLEM then names)."""

    high: int  # 0: queue offloading off (every queue segment is refilled)
    low: int
    per_segment: int
    done_mode: str
    done_high: int
    problem: str | None = None
    shard_tags: str = ""  # the project's shards (tracker_core.project.shard_layout), read in the same call

    @classmethod
    def read(cls, client, k: keyspace.ProjectKeys) -> Watermarks:
        fields = (*settings_schema.OFFLOAD_FIELDS, "done_mode", "done_offload_high", SHARD_TAGS_FIELD)
        values = client.hmget(k.settings, *fields)
        queues = settings_schema.offload_rules(dict(zip(settings_schema.OFFLOAD_FIELDS, values[:3])))
        return cls(
            high=queues.high,
            low=queues.low,
            per_segment=queues.per_segment,
            done_mode=values[3] or "keep",
            done_high=int(values[4]) if values[4] is not None else DONE_HIGH_DEFAULT,
            problem=queues.problem,
            shard_tags=values[5] or "",
        )


@dataclass
class ProjectPass:
    """One pass over one project, under its lease: what the steps read, and the report they fill.

    CLASSIFIED_AGES (project -> settings age last reclassified) and STATS_AT (project -> monotonic
    time of the last upkeep) are the maintainer's memory across passes; None turns that step off.
    """

    client: redis.Redis
    k: keyspace.ProjectKeys
    directory: Path
    lease: Lease
    watermarks: Watermarks
    cleanup: bool = False
    classified_ages: dict | None = None
    stats_at: dict | None = None
    now: float = field(default_factory=time.monotonic)
    report: dict = field(default_factory=lambda: {"offloaded": 0, "refilled": 0})
    by_queue: dict = field(default_factory=dict)  # queue -> {"offloaded"|"refilled": n}
    demand: RefillDemand | None = None  # refill on demand (offload.demand); None: at low only
    layout: ShardLayout | None = None  # the project's shards, for the statistics upkeep

    @property
    def name(self) -> str:
        """What refill on demand keeps this shard's figures under: its tag's inside, the project's
        name for a one-shard project and a first shard, PROJECT.I[.SALT] for another."""
        return self.k.tag[1:-1]

    def refill_target(self, queue: str, size: int | None) -> int:
        """The size QUEUE (now SIZE, None: not counted) is refilled up to: the low watermark,
        or with refill on demand more while claims drain it fast (RefillDemand.target)."""
        w = self.watermarks
        if self.demand is None:
            return w.low
        return self.demand.target(self.name, queue, size, w.high, w.low, w.per_segment)

    def queue_lock(self):
        """Held around each segment refill: the refiller thread refills this project too."""
        return nullcontext() if self.demand is None else self.demand.lock(self.name)

    def add(self, what: str, n: int) -> None:
        if n:
            self.report[what] = self.report.get(what, 0) + n

    def moved(self, queue: str, what: str, n: int) -> None:
        """Count N items of QUEUE offloaded or refilled, as each segment moves (a lost lease
        later in the pass takes nothing back)."""
        if n:
            self.by_queue.setdefault(queue, {}).setdefault(what, 0)
            self.by_queue[queue][what] += n
            self.report[what] += n
            if self.demand is not None:  # its drain meter must not count our own moves
                self.demand.moved(self.name, queue, n if what == "refilled" else -n)


Step = Callable[[ProjectPass], None]


def recover_unfinished(p: ProjectPass) -> None:
    """Put back the items an unfinished offload left in `offloading` (its maintainer is gone)."""
    if p.client.exists(p.k.offloading) or p.client.hexists(p.k.segment_queues, STAGED_FIELD):
        p.report["recovered"] = recover(p.client, p.k, p.directory, p.lease)


def remove_stale_files(p: ProjectPass) -> None:
    """Delete segment files no registered segment refers to (only on a cleanup pass)."""
    if p.cleanup:
        p.add("files_removed", cleanup_files(p.client, p.k, p.directory))


def balance_queues(p: ProjectPass) -> None:
    """Offload each shared queue down to the high watermark, or refill it below the low one.

    With offloading off (high 0) every queue segment comes back. A segment whose file cannot be
    read is skipped (left registered) and reported under "unreadable_segments"; "by_queue"
    breaks the figures down when a queue other than todo moved. Settings that could strand
    items are reported under "offload_warning", with the stand-ins used instead.
    """
    w = p.watermarks
    if w.problem is not None:
        p.report["offload_warning"] = {
            "problem": w.problem,
            "used": {"offload_high": w.high, "offload_low": w.low, "offload_segment_items": w.per_segment},
        }
    skip: set = set()
    try:
        for queue in QUEUES:
            excess = p.client.scard(source_key(p.k, queue)) - p.watermarks.high
            if p.watermarks.high > 0 and excess > 0:
                _offload_excess(p, queue, excess)
            else:
                _refill_below_low(p, queue, skip)
        _write_watch(p, skip)
        if skip:
            p.report["unreadable_segments"] = sorted(skip)
    finally:  # what moved before a lost lease still counts
        if set(p.by_queue) - {"todo"}:
            p.report["by_queue"] = p.by_queue


def _offload_excess(p: ProjectPass, queue: str, excess: int) -> None:
    """Offload EXCESS items of QUEUE, a segment at a time."""
    while excess > 0:
        n = offload_one(p.client, p.k, p.directory, min(excess, p.watermarks.per_segment), p.lease, queue)
        if n == 0:
            break
        p.moved(queue, "offloaded", n)
        excess -= n


def _refill_below_low(
    p: ProjectPass, queue: str, skip: set, sources: dict | None = None, count_first: bool = True
) -> None:
    """Refill QUEUE from its own segments while below its target (all, with high 0): the low
    watermark, or more while claims drain it fast (ProjectPass.refill_target). The refill
    script refills only while the queue is below the target, so the pass and the refiller
    thread never take it past it; each segment's refill holds the queue lock besides, so
    neither reads a file the other is deleting. The queue is counted before a file is read
    (a file read for nothing costs a 50,000-item segment's decompression), except before the
    first with COUNT_FIRST false: a claim that asked found it low, and a call fewer comes
    first. SOURCES: the registry as read by the caller (see staging.refill_one), else read
    for each segment."""
    key = source_key(p.k, queue)
    count = count_first
    while True:
        with p.queue_lock():
            below = None
            if p.watermarks.high > 0:
                size = p.client.scard(key) if count else None
                below = p.refill_target(queue, size)
                if size is not None and size >= below:
                    break
            n = refill_one(p.client, p.k, p.directory, p.lease, queue, skip, sources, below)
            if n < 0:  # none left, or the queue holds its target already
                break
            p.moved(queue, "refilled", n)
        count = True


def _write_watch(p: ProjectPass, skip: set, sources: dict | None = None) -> None:
    """With refill on demand, tell claims at which queue sizes to ask for the next refill (the
    queues whose readable segments wait, at their least target; offload.demand). SOURCES: the
    registry as the caller keeps it, else read here."""
    if p.demand is not None:
        with p.queue_lock():
            w = p.watermarks
            if sources is None:  # a pass: what the refiller starts from next
                sources = p.demand.sources[p.name] = segment_sources(p.client, p.k)
            write_watch(p.client, p.k, p.lease, p.demand.watch(p.k, sources, w.high, w.low, skip))


def refill_queues(p: ProjectPass, skip: set, count_first: bool = False) -> None:
    """Refill each shared queue to its target, then write the watch again: what the refiller
    runs when a project's claims ask (offloading, which a pass does, may fsync for long). SKIP:
    segments known unreadable, and those found so now. Under load each call to Redis before the
    refill script delays the items a claim waits for by milliseconds, so none is made: the
    registry is the one the last pass read, kept right by every refill since (staging.refill_one
    reads it again when it finds a segment gone, or none left), and the queue is not counted
    first (the script refills only below the target). COUNT_FIRST: count each queue before its
    first file is read all the same (the shards of a sharded project that did not ask)."""
    assert p.demand is not None, "refill_queues runs for refill on demand"
    sources = p.demand.sources.get(p.name)
    if sources is None:
        sources = p.demand.sources[p.name] = segment_sources(p.client, p.k)
    for queue in QUEUES:
        if queue in sources.values():
            _refill_below_low(p, queue, skip, sources, count_first=count_first)
    _write_watch(p, skip, sources)
    if skip:
        p.report["unreadable_segments"] = sorted(skip)


def offload_done(p: ProjectPass) -> None:
    """With done_mode=offload, move `done` beyond done_offload_high to segment files (kept)."""
    w = p.watermarks
    if w.done_mode != "offload":
        return
    excess = p.client.scard(p.k.done) - w.done_high
    while excess > 0:
        n = offload_one(p.client, p.k, p.directory, min(excess, w.per_segment), p.lease, DONE)
        if n == 0:
            break
        p.add("done_offloaded", n)
        excess -= n


def archive_done_log(p: ProjectPass) -> None:
    """The done log's entries beyond log_maxlen to segment files, then trimmed (see
    tracker_core.donelog.log_archive); a cleanup pass also deletes its stale unregistered files."""
    if p.cleanup:
        p.add("log_files_removed", log_archive.cleanup(p.client, p.k, p.directory, min_age_s=STALE_FILE_S))
    p.add("log_archived", log_archive.archive(p.client, p.k, p.directory, p.lease))


def reclassify_changed(p: ProjectPass) -> None:
    """Reclassify a project whose settings moved since the last pass: queued items that a new or
    changed limit matches move to its sub-queue in the background (reported as "held")."""
    if p.classified_ages is None:
        return
    age = p.client.hget(p.k.settings, "settings_age")
    if age is not None and p.classified_ages.get(p.k.project) != age:
        p.report["held"] = pattern_limits.reclassify(p.client, p.k)
        p.classified_ages[p.k.project] = age


def upkeep_stats(p: ProjectPass) -> None:
    """Roll the statistics up and sample the backlog, at most every STATS_EVERY_S per project."""
    if p.stats_at is None or p.now - p.stats_at.get(p.k.project, -float("inf")) < STATS_EVERY_S:
        return
    stats.upkeep(p.client, p.k.project, redis_clock.now_ms(p.client), p.layout)
    p.stats_at[p.k.project] = p.now


OFFLOAD_STEPS: tuple[Step, ...] = (
    recover_unfinished,
    remove_stale_files,
    balance_queues,
    offload_done,
    archive_done_log,
)
STEPS: tuple[Step, ...] = (*OFFLOAD_STEPS, reclassify_changed, upkeep_stats)


def run_steps(p: ProjectPass, steps: Sequence[Step]) -> dict:
    """Run STEPS in order; a lost lease ends the pass with "lease_lost" in the report."""
    try:
        for step in steps:
            step(p)
    except (LeaseLost, log_archive.LogLeaseLost):
        p.report["lease_lost"] = True
    return p.report
