"""The maintenance loop (`tracker maintain`): per project, a pass of named steps under its lease.

A pass over one project runs STEPS in order (tracker_core.maintainer.steps: recover, clean up,
balance the queues, offload done, archive the done log, reclassify, statistics upkeep), each a
small function of the `ProjectPass`; a sharded project's pass runs them on every shard
(tracker_core.maintainer.shard_passes). OFFLOAD_STEPS move segments (what `maintain_project` runs); a lost
lease ends the pass at the step that found it, with "lease_lost" in the report.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from tracker_core import keyspace
from tracker_core.maintainer import shard_passes
from tracker_core.maintainer.steps import (  # noqa: F401 - the steps, as maintenance named them
    CLEANUP_EVERY_S,
    DONE_HIGH_DEFAULT,
    OFFLOAD_STEPS,
    PROJECT_ERRORS,
    STATS_EVERY_S,
    STEPS,
    ProjectPass,
    Step,
    Watermarks,
    archive_done_log,
    balance_queues,
    offload_done,
    reclassify_changed,
    recover_unfinished,
    refill_queues,
    remove_stale_files,
    run_steps,
    upkeep_stats,
)
from tracker_core.offload import segment_file
from tracker_core.offload.demand import RefillDemand, Refiller
from tracker_core.offload.lease import LEASE_MS, Lease, LeaseLost, default_holder
from tracker_core.project.shard_layout import SHARD_TAGS_FIELD, ShardLayout


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
        notifier=None,
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
        self.shard_ages: dict[tuple, dict] = {}  # (project, shard) -> classified_ages of its passes
        self.shard_watermarks: dict[tuple, Watermarks] = {}  # (project, shard): as last read
        self.shard_unreadable: dict[tuple, list] = {}  # (project, shard): its unreadable segments
        # The webhooks' detector and deliverer (tracker_core.notify.delivery.Notifier), run on
        # threads of their own while run() runs: no pass waits for a receiver.
        self.notifier = notifier

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
                    for folder in [
                        self.directory / project,
                        *segment_file.shard_folders(self.directory, project),
                    ]:
                        shutil.rmtree(folder, ignore_errors=True)
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
        w = self.watermarks[project] = Watermarks.read(self.client, k)
        layout = ShardLayout.from_settings(project, {SHARD_TAGS_FIELD: w.shard_tags})
        if layout.sharded:
            report = shard_passes.sharded_pass(self, layout, cleanup, now)
        else:
            p = ProjectPass(
                self.client,
                k,
                self.directory,
                lease,
                w,
                cleanup=cleanup,
                classified_ages=self.classified_ages if self.reclassify else None,
                stats_at=self.stats_at if self.stats_upkeep else None,
                now=now,
                demand=self.demand,
                layout=layout,
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
        if watermarks.shard_tags:  # a sharded project: each shard refilled under its own lease
            return shard_passes.refill_shards(
                self, ShardLayout.from_settings(project, {SHARD_TAGS_FIELD: watermarks.shard_tags})
            )
        p = ProjectPass(self.client, k, self.directory, lease, watermarks, demand=self.demand)
        return self.refill(project, p, set(self.unreadable.get(project, ())))

    def refill(self, project: str, p: ProjectPass, skip: set, count_first: bool = False) -> dict:
        """refill_queues of P (one project, or one shard of PROJECT) under its lease, taken again
        once if it went; its report ("lease_lost", "error": logged)."""
        lease = p.lease
        try:
            try:
                refill_queues(p, skip, count_first)
            except LeaseLost:
                # Renewed less than a third of it ago, and gone since (Redis restarted without
                # it): taken again unless another maintainer has it, as a pass would.
                if not lease.take():
                    raise
                refill_queues(p, skip, count_first)
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
        if self.notifier is not None:
            self.notifier.start()
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
            if self.notifier is not None:
                self.notifier.stop()
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
