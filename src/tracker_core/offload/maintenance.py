"""The maintenance loop (`tracker maintain`): per project, a pass of named steps under its lease.

A pass over one project runs STEPS in order, each a small function of the `ProjectPass`:

1. recover_unfinished: put back the items of an offload that a dead maintainer left staged;
2. remove_stale_files: delete unregistered segment files (first pass, then every CLEANUP_EVERY_S);
3. balance_queues: offload each shared queue down to offload_high, or refill it from its own
   segments while below offload_low (everything, with offloading off);
4. offload_done: with done_mode=offload, `done` beyond done_offload_high to segment files;
5. archive_done_log: the done log's entries beyond log_maxlen to files (tracker_core.log_archive);
6. reclassify_changed: queued items that a new or changed limit matches go to its sub-queue;
7. upkeep_stats: roll-ups and backlog samples (every STATS_EVERY_S).

Steps 1-5 move segments (OFFLOAD_STEPS, what `maintain_project` runs); a lost lease ends the
pass at the step that found it, with "lease_lost" in the report (nothing half-done counts).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

from tracker_core import keys as keyspace
from tracker_core import limits as limits_mod
from tracker_core import log_archive, redis_clock, scripts, stats
from tracker_core import settings as settings_mod
from tracker_core.offload.demand import RefillDemand, Refiller, write_watch
from tracker_core.offload.lease import LEASE_MS, Lease, LeaseLost, default_holder
from tracker_core.offload.segment_registry import (
    DONE,
    QUEUES,
    STAGED_FIELD,
    OffloadError,
    segment_sources,
    source_key,
)
from tracker_core.offload.staging import STALE_FILE_S, cleanup_files, offload_one, recover, refill_one

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

    @classmethod
    def read(cls, client, k: keyspace.ProjectKeys) -> Watermarks:
        values = client.hmget(k.settings, *settings_mod.OFFLOAD_FIELDS, "done_mode", "done_offload_high")
        queues = settings_mod.offload_rules(dict(zip(settings_mod.OFFLOAD_FIELDS, values[:3])))
        return cls(
            high=queues.high,
            low=queues.low,
            per_segment=queues.per_segment,
            done_mode=values[3] or "keep",
            done_high=int(values[4]) if values[4] is not None else DONE_HIGH_DEFAULT,
            problem=queues.problem,
        )


@dataclass
class ProjectPass:
    """One pass over one project, under its lease: what the steps read, and the report they fill.

    CLASSIFIED_AGES (project -> settings age last reclassified) and STATS_AT (project -> monotonic
    time of the last upkeep) are the maintainer's memory across passes; None turns that step off.
    """

    client: object
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

    def refill_target(self, queue: str, size: int | None) -> int:
        """The size QUEUE (now SIZE, None: not counted) is refilled up to: the low watermark,
        or with refill on demand more while claims drain it fast (RefillDemand.target)."""
        w = self.watermarks
        if self.demand is None:
            return w.low
        return self.demand.target(self.k.project, queue, size, w.high, w.low, w.per_segment)

    def queue_lock(self):
        """Held around each segment refill: the refiller thread refills this project too."""
        return nullcontext() if self.demand is None else self.demand.lock(self.k.project)

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
                self.demand.moved(self.k.project, queue, n if what == "refilled" else -n)


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
                sources = p.demand.sources[p.k.project] = segment_sources(p.client, p.k)
            write_watch(p.client, p.k, p.lease, p.demand.watch(p.k, sources, w.high, w.low, skip))


def refill_queues(p: ProjectPass, skip: set) -> None:
    """Refill each shared queue to its target, then write the watch again: what the refiller
    runs when a project's claims ask (offloading, which a pass does, may fsync for long). SKIP:
    segments known unreadable, and those found so now. Under load each call to Redis before the
    refill script delays the items a claim waits for by milliseconds, so none is made: the
    registry is the one the last pass read, kept right by every refill since (staging.refill_one
    reads it again when it finds a segment gone, or none left), and the queue is not counted
    first (the script refills only below the target)."""
    sources = p.demand.sources.get(p.k.project)
    if sources is None:
        sources = p.demand.sources[p.k.project] = segment_sources(p.client, p.k)
    for queue in QUEUES:
        if queue in sources.values():
            _refill_below_low(p, queue, skip, sources, count_first=False)
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
    tracker_core.log_archive); a cleanup pass also deletes its stale unregistered files."""
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
        p.report["held"] = limits_mod.reclassify(p.client, p.k)
        p.classified_ages[p.k.project] = age


def upkeep_stats(p: ProjectPass) -> None:
    """Roll the statistics up and sample the backlog, at most every STATS_EVERY_S per project."""
    if p.stats_at is None or p.now - p.stats_at.get(p.k.project, -float("inf")) < STATS_EVERY_S:
        return
    stats.upkeep(p.client, p.k.project, redis_clock.now_ms(p.client))
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


def maintain_project(
    client,
    project: str,
    directory: Path,
    holder: str | None = None,
    lease: Lease | None = None,
    cleanup: bool = False,
) -> dict | None:
    """Run PROJECT's OFFLOAD_STEPS once; None when another maintainer holds its lease.

    CLEANUP also deletes stale unregistered files. Without HOLDER or LEASE, the call takes the
    lease for itself and gives it up when done.
    """
    k = keyspace.ProjectKeys(project)
    own = lease is None and holder is None
    lease = lease or Lease(client, k, holder)
    if not lease.take():
        return None
    try:
        p = ProjectPass(client, k, Path(directory), lease, Watermarks.read(client, k), cleanup=cleanup)
        return run_steps(p, OFFLOAD_STEPS)
    finally:
        if own:
            lease.release()


class Maintainer:
    """What `tracker maintain` runs: passes over every project, each under the project's lease."""

    def __init__(
        self,
        client,
        directory: Path,
        holder: str | None = None,
        lease_ms: int = LEASE_MS,
        reclassify: bool = True,
        stats_upkeep: bool = True,
        log=None,
    ):
        self.client = client
        self.directory = Path(directory)
        self.holder = holder or default_holder()
        self.lease_ms = lease_ms
        self.reclassify = reclassify
        self.stats_upkeep = stats_upkeep
        self.log = log or logging.getLogger("tracker.maintain").warning
        self.classified_ages: dict = {}
        self.cleaned_at: dict[str, float] = {}  # the first pass over a project cleans up
        self.stats_at: dict[str, float] = {}
        self.leases: dict[str, Lease] = {}
        self.unreadable: dict[str, list] = {}  # logged once, not every pass
        self.warned: dict[str, dict | None] = {}  # offload warnings, logged once too
        self.demand = RefillDemand()  # refill on demand: drain meters, targets, queue locks
        self.watermarks: dict[str, Watermarks] = {}  # as the last pass read them

    def _lease(self, project: str) -> Lease:
        if project not in self.leases:
            self.leases[project] = Lease(
                self.client, keyspace.ProjectKeys(project), self.holder, self.lease_ms
            )
        return self.leases[project]

    def remove_deleted_projects(self) -> list[str]:
        """Delete the segment folders of deleted projects (under their lease); return them."""
        removed = []
        for project in sorted(self.client.smembers(keyspace.SEGMENTS_DELETED)):
            k = keyspace.ProjectKeys(project)
            if not keyspace.valid_project_name(project):
                self.client.srem(keyspace.SEGMENTS_DELETED, project)
                continue
            lease = self._lease(project)
            if not lease.take():
                continue
            try:
                if not self.client.exists(k.settings):  # not created again since
                    shutil.rmtree(self.directory / project, ignore_errors=True)
                    removed.append(project)
                self.client.srem(keyspace.SEGMENTS_DELETED, project)
            finally:
                lease.release()
                self.leases.pop(project, None)
                self.watermarks.pop(project, None)
                self.demand.forget(project)
        return removed

    def pass_once(self) -> dict:
        """One pass over every project; per project its report, or why it was skipped.

        A project's own trouble (a full disk, a corrupt file) is reported under "error" and the
        pass goes on with the next; trouble with Redis itself propagates to the caller.
        """
        report: dict = {}
        self.remove_deleted_projects()
        for project in sorted(self.client.smembers(keyspace.PROJECTS)):
            try:
                report[project] = self._project(project)
            except PROJECT_ERRORS as exc:
                report[project] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        return report

    def _project(self, project: str) -> dict:
        now = time.monotonic()
        cleanup = now - self.cleaned_at.get(project, -float("inf")) >= CLEANUP_EVERY_S
        lease = self._lease(project)
        if not lease.take():
            return {"lease": "held elsewhere"}
        k = keyspace.ProjectKeys(project)
        self.watermarks[project] = Watermarks.read(self.client, k)
        p = ProjectPass(
            self.client,
            k,
            self.directory,
            lease,
            self.watermarks[project],
            cleanup=cleanup,
            classified_ages=self.classified_ages if self.reclassify else None,
            stats_at=self.stats_at if self.stats_upkeep else None,
            now=now,
            demand=self.demand,
        )
        report = run_steps(p, STEPS)
        if cleanup:
            self.cleaned_at[project] = now
        return report

    def refill_now(self, project: str) -> dict | None:
        """What the refiller runs when PROJECT's claims ask (offload.demand): its queues refilled
        to their targets and the watch written again, under its lease. None when another
        maintainer holds the lease (the message reached it too); a project's own trouble is
        logged and reported under "error", as a pass reports it."""
        lease = self._lease(project)
        try:  # renewed only once a third of it has passed: a call fewer before the refill
            lease.keep()
        except LeaseLost:
            return None
        k = keyspace.ProjectKeys(project)
        # The last pass's reading (at most an interval old; a refill stays under offload_high),
        # again a call fewer before the refill.
        watermarks = self.watermarks.get(project) or Watermarks.read(self.client, k)
        p = ProjectPass(self.client, k, self.directory, lease, watermarks, demand=self.demand)
        skip = set(self.unreadable.get(project, ()))
        try:
            try:
                refill_queues(p, skip)
            except LeaseLost:
                # Renewed less than a third of it ago, and gone since (Redis restarted without
                # it): taken again unless another maintainer has it, as a pass would.
                if not lease.take():
                    raise
                refill_queues(p, skip)
        except LeaseLost:
            p.report["lease_lost"] = True
        except PROJECT_ERRORS as exc:
            p.report["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            self.log(f"{project}: refill on demand: {p.report['error']}")
        return p.report

    def run(
        self,
        interval: float,
        stop: threading.Event | None = None,
        passes: int | None = None,
        max_backoff_s: float = 60.0,
    ) -> None:
        """Pass every INTERVAL seconds until STOP is set (or PASSES were made).

        A failed pass (Redis unreachable, a bug) is logged in one line and retried after a
        back-off that doubles up to MAX_BACKOFF_S; nothing ends the loop but STOP.
        """
        stop = stop or threading.Event()
        failures = made = 0
        # Claims ask for refills between passes (offload.demand): a thread of its own waits
        # on them, so a pass busy writing files delays no refill.
        refiller_stop = threading.Event()
        refiller = Refiller(
            self.client, self.refill_now, refiller_stop, known=lambda: list(self.watermarks), log=self.log
        )
        refiller.start()
        try:
            while not stop.is_set():
                try:
                    self.log_report(self.pass_once())
                    failures = 0
                    delay = interval
                except Exception as exc:  # noqa: BLE001 - the loop must outlive any one pass
                    failures += 1
                    delay = min(max_backoff_s, interval * 2 ** min(failures, 20))
                    line = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    self.log(f"pass failed ({line}); next try in {delay:.1f}s")
                made += 1
                if passes is not None and made >= passes:
                    break
                stop.wait(delay)
        finally:
            refiller_stop.set()  # before the leases go: it may be refilling under one
            refiller.thread.join(timeout=10)
            self.release()

    def log_report(self, report: dict) -> None:
        """Log a pass's errors, and unreadable segments and unsafe settings once (not every pass)."""
        for project, result in report.items():
            if "error" in result:
                self.log(f"{project}: {result['error']}")
            unreadable = result.get("unreadable_segments", [])
            if unreadable and unreadable != self.unreadable.get(project):
                self.log(f"{project}: segments {unreadable} have no readable file (left registered)")
            self.unreadable[project] = unreadable
            warning = result.get("offload_warning")
            if warning and warning != self.warned.get(project):
                used = " ".join(f"{name}={n}" for name, n in warning["used"].items())
                self.log(f"{project}: {warning['problem']}; refilling meanwhile with {used}")
            # Forgotten only by a whole pass that found the settings sound (a skipped or cut
            # pass may not have read them): fixed and broken again, it is logged again.
            if warning or not {"lease", "error", "lease_lost"} & set(result):
                self.warned[project] = warning

    def release(self) -> None:
        """Give up every lease this maintainer holds (best effort: they expire anyway)."""
        for lease in self.leases.values():
            try:
                lease.release()
            except Exception:  # noqa: BLE001 - Redis may be gone; the lease expires
                pass


def maintain_once(client, holder: str, directory: Path, classified_ages: dict | None = None) -> dict:
    """One maintenance pass over every project (see Maintainer.pass_once).

    With CLASSIFIED_AGES (project -> settings age last reclassified, kept by the caller), a
    project whose settings moved since is reclassified.
    """
    maintainer = Maintainer(
        client, directory, holder, reclassify=classified_ages is not None, stats_upkeep=False
    )
    if classified_ages is not None:
        maintainer.classified_ages = classified_ages
    return maintainer.pass_once()
