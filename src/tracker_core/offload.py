"""Offloading: move the excess of long queues (and of `done`) to zstandard segment files, and refill.

`tracker maintain` runs a `Maintainer` on every node. Per project, each of the shared queues
(todo, todo:backfeed, todo:secondary, todo:redo) whose size passes `offload_high` has its excess
written to segment files; a queue that falls below `offload_low` gets its own segments back,
oldest first. With `done_mode=offload`, `done` beyond `done_offload_high` goes to segment files
too; those stay on disk (they are done, not work: never refilled, counted in `tracker status`).
The done log's entries beyond log_maxlen are archived under the same lease, in SEGMENTS_DIR/P/log/
(tracker_core.log_archive: the same write-fsync-then-register rule).

A lease per project (`{P}:maintain_lease`, in the project's slot) lets one maintainer at a time
move a project's segments, and every script that stages, commits, aborts or refills checks the
holder in the same atomic step, so a maintainer whose lease ran out (a long pass, a pause) can
change nothing: its next step is refused, it stops that project's pass, and whatever file it
wrote stays unregistered (removed later). The lease is renewed between steps of a long pass.
The segment directory must be the same storage for every node that may hold a lease (a shared
mount, or run maintain on one node only).

Crash safety, item by item (every item is always in exactly one counted place):
- offload: items move queue -> `offloading` (one script, which also reserves the segment number
  and records it with the source in `segment_queues` '#staged'); the file is written to a temp
  name, fsynced, renamed, the directory fsynced; only then one script registers the segment and
  drops `offloading`. A crash before that leaves the items in `offloading` (counted as
  offloaded): the next holder puts them back into their queue, a bounded chunk per script, and
  deletes the unregistered file.
- refill: the file is read, one script puts its items into their queue and unregisters the
  segment; only then is the file deleted. A crash in between leaves an unregistered file.
- Unregistered files (left by a crash, a lost lease, or a failed unlink) are deleted when a
  maintainer starts and every STALE_FILE_S after, once older than STALE_FILE_S (younger ones
  may be an import between writing its file and registering it). Files of deleted projects go
  too (`tracker project delete` leaves a tombstone in SEGMENTS_DELETED).
The registry (`segments` hash: number -> items) decides which files count.

Item status (`GET /P/items/NAME.json`, item_status.py) does not open segment files: an item on
its way to a segment is "offloaded", and a name found nowhere while the project has segment files
is answered with `maybe: ["offloaded"]`. Answering from disk would cost a scan of every segment;
the Bloom filter only knows "seen", not where.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

import zstandard

from tracker_core import durable, log_archive, scripts
from tracker_core import keys as keyspace
from tracker_core import limits as limits_mod

LEASE_MS = 30_000
STALE_FILE_S = 600  # unregistered files younger than this may be an import in progress
CLEANUP_EVERY_S = STALE_FILE_S
STATS_EVERY_S = 60  # statistics upkeep (roll-ups, backlog samples) per project
NEXT_FIELD = "#next"
STAGED_FIELD = "#staged"
ZSTD_LEVEL = 3
ABORT_CHUNK = 10_000
QUEUES = ("todo", "backfeed", "secondary", "redo")  # offloaded past the watermarks, refilled
DONE = "done"  # offloaded with done_mode=offload, kept
NOT_HOLDER, STAGE_PENDING, WRONG_SOURCE, BAD_COUNT = -4, -2, -5, -6


class OffloadError(ValueError):
    """A bad segment request; the message is one line."""


class LeaseLost(RuntimeError):
    """Another maintainer holds the project's lease now: stop this project's pass."""


def segment_path(directory: Path, project: str, number: int) -> Path:
    return Path(directory) / project / f"{number}.zst"


def items_digest(items: list[str]) -> str:
    """What identifies a segment's items across export and import (order as in the file)."""
    return hashlib.sha256("\0".join(items).encode("utf-8", "surrogateescape")).hexdigest()


def write_segment(path: Path, items: list[str]) -> None:
    """Write ITEMS (NUL-separated, zstandard) durably: temp file, fsync, rename, fsync dir."""
    data = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(
        "\0".join(items).encode("utf-8", "surrogateescape")
    )
    durable.write_file(path, lambda f: f.write(data))


def read_segment(path: Path) -> list[str]:
    with open(path, "rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read()
    text = data.decode("utf-8", "surrogateescape")
    return text.split("\0") if text else []


def _text(value):
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def registry(client, k: keyspace.ProjectKeys) -> dict[int, int]:
    """Registered segments: number -> items."""
    return {
        int(n): int(c)
        for n, c in ((_text(n), c) for n, c in client.hgetall(k.segments).items())
        if not n.startswith("#")
    }


def segment_sources(client, k: keyspace.ProjectKeys) -> dict[int, str]:
    """Registered segments: number -> the queue (or done) their items came from."""
    counts = registry(client, k)
    named = {
        int(n): _text(q)
        for n, q in ((_text(n), q) for n, q in client.hgetall(k.segment_queues).items())
        if not n.startswith("#")
    }
    return {n: named.get(n, "todo") for n in counts}


def staged(client, k: keyspace.ProjectKeys) -> tuple[int | None, str]:
    """The segment number and source of the set in `offloading` (None, 'todo' when unknown)."""
    value = _text(client.hget(k.segment_queues, STAGED_FIELD))
    if not value:
        return None, "todo"
    number, _, source = value.partition(" ")
    return int(number), source


def offloaded_count(client, k: keyspace.ProjectKeys) -> int:
    """Queued items offloaded (in registered segments or staged); done segments not included."""
    sources = segment_sources(client, k)
    total = sum(c for n, c in registry(client, k).items() if sources.get(n) != DONE)
    return total + (client.scard(k.offloading) if staged(client, k)[1] != DONE else 0)


def source_key(k: keyspace.ProjectKeys, name: str) -> str:
    if name == DONE:
        return k.done
    if name not in QUEUES:
        raise OffloadError(f"segments hold todo, backfeed, secondary, redo or done, not {name!r}")
    return k.queue(name)


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """One maintainer's hold on one project's lease; renewed between the steps of a pass."""

    def __init__(self, client, k: keyspace.ProjectKeys, holder: str | None = None, lease_ms: int = LEASE_MS):
        self.client = client
        self.key = k.maintain_lease
        self.holder = holder or default_holder()
        self.lease_ms = lease_ms
        self.renewed_at = -float("inf")

    def take(self) -> bool:
        """Take or renew the lease; False when another maintainer holds it."""
        if scripts.run(self.client, "maintain_lease", (self.key,), (self.holder, self.lease_ms)) != 1:
            return False
        self.renewed_at = time.monotonic()
        return True

    def keep(self) -> None:
        """Renew once a third of the lease has passed; raise LeaseLost when someone else has it."""
        if (time.monotonic() - self.renewed_at) * 1000 >= self.lease_ms / 3 and not self.take():
            raise LeaseLost(f"another maintainer holds {self.key}")

    def release(self) -> None:
        scripts.run(self.client, "maintain_lease", (self.key,), (self.holder, self.lease_ms, "release"))
        self.renewed_at = -float("inf")

    def checked(self, reply):
        """REPLY of a lease-checking script; LeaseLost when it refused for want of the lease."""
        code = reply[0] if isinstance(reply, list) else reply
        if code == NOT_HOLDER:
            raise LeaseLost(f"another maintainer holds {self.key}")
        return reply


def _lease(client, k, lease: Lease | None) -> Lease:
    """LEASE, or a new one held for this call (OffloadError when another maintainer has it)."""
    if lease is None:
        lease = Lease(client, k)
        if not lease.take():
            raise OffloadError(f"another maintainer holds the lease of {k.project}")
    return lease


def _remove_number(directory: Path, project: str, number: int) -> None:
    """Delete segment NUMBER's file and any temp file of it (it is not registered)."""
    folder = Path(directory) / project
    if folder.is_dir():
        for path in folder.glob(f"{number}.*"):
            if path.name.split(".", 1)[0] == str(number):
                path.unlink(missing_ok=True)


def recover(client, k: keyspace.ProjectKeys, directory: Path, lease: Lease | None = None) -> int:
    """Put the items of an unfinished offload back where they came from; delete its file.

    Runs under the lease, so the staging belongs to a maintainer that died or lost its lease:
    its commit will be refused. Moves ABORT_CHUNK items per script (Redis stays responsive).
    """
    lease = _lease(client, k, lease)
    number, source = staged(client, k)
    restored = 0
    while True:
        lease.keep()
        moved, left = lease.checked(
            scripts.run(
                client,
                "offload_abort",
                (lease.key, k.offloading, k.segment_queues, source_key(k, source)),
                (lease.holder, source, ABORT_CHUNK),
            )
        )
        if moved == WRONG_SOURCE:  # restaged in between (not under our lease): look again
            number, source = staged(client, k)
            continue
        restored += moved
        if left == 0:
            break
    if number is not None:
        _remove_number(directory, k.project, number)
    return restored


def cleanup_files(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    now_s: float | None = None,
    min_age_s: float = STALE_FILE_S,
) -> int:
    """Delete files of PROJECT no registered segment refers to, once older than MIN_AGE_S."""
    folder = Path(directory) / k.project
    if not folder.is_dir():
        return 0
    paths = list(folder.iterdir())
    registered = registry(client, k)
    now_s = time.time() if now_s is None else now_s
    removed = 0
    for path in paths:
        stem = path.name.split(".", 1)[0]
        if stem.isdigit() and path.name == f"{int(stem)}.zst" and int(stem) in registered:
            continue
        if path.is_dir():  # log/: the done log's archive, cleaned by log_archive.cleanup
            continue
        try:
            if now_s - path.stat().st_mtime > min_age_s:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            pass
    return removed


def offload_one(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    count: int,
    lease: Lease | None = None,
    source: str = "todo",
) -> int:
    """Move up to COUNT items of SOURCE into a new segment file; return how many moved."""
    lease = _lease(client, k, lease)
    lease.keep()
    reply = lease.checked(
        scripts.run(
            client,
            "offload_stage",
            (lease.key, source_key(k, source), k.offloading, k.segments, k.segment_queues),
            (lease.holder, count, source),
        )
    )
    if reply[0] == STAGE_PENDING:
        raise OffloadError(f"an earlier offload of {k.project} is unfinished (recover it first)")
    if reply[0] == 0:
        return 0
    if reply[0] < 0:  # a bad count or '#next': refused before anything moved
        raise OffloadError(f"offload of {k.project} refused by Redis ({reply[0]})")
    number, items = int(reply[0]), [_text(i) for i in reply[1:]]
    try:
        write_segment(segment_path(directory, k.project, number), items)
    except Exception:  # a full disk, a bad directory: put the items back before reporting
        try:
            recover(client, k, directory, lease)
        except Exception:  # noqa: BLE001 - the next pass recovers them
            pass
        raise
    lease.keep()
    done = lease.checked(
        scripts.run(
            client,
            "offload_commit",
            (lease.key, k.offloading, k.segments, k.segment_queues, k.stats),
            (lease.holder, number, len(items), source),
        )
    )
    if done != 1:  # someone else aborted our staging: our file stays unregistered
        raise LeaseLost(f"the staged set of {k.project} changed under this maintainer")
    return len(items)


def refill_one(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    lease: Lease | None = None,
    queue: str = "todo",
    skip: set | None = None,
) -> int:
    """Put QUEUE's oldest readable segment back into QUEUE; return its items (-1: none left).

    Segments whose file is missing or unreadable are added to SKIP (and left registered, still
    counted, for an admin to look at), so one bad file does not stop the refill of the others.
    """
    lease = _lease(client, k, lease)
    skip = set() if skip is None else skip
    passed: set = set()
    while True:
        numbers = sorted(
            n
            for n, q in segment_sources(client, k).items()
            if q == queue and n not in skip and n not in passed
        )
        if not numbers:
            return -1
        number = numbers[0]
        path = segment_path(directory, k.project, number)
        try:
            items = read_segment(path)
        except (OSError, zstandard.ZstdError, UnicodeDecodeError):
            skip.add(number)
            continue
        lease.keep()
        refilled = lease.checked(
            scripts.run(
                client,
                "refill",
                (lease.key, k.segments, k.segment_queues, source_key(k, queue), k.stats),
                (lease.holder, number, queue, *items),
            )
        )
        if refilled >= 0:
            path.unlink(missing_ok=True)
            return refilled
        if refilled == BAD_COUNT:
            skip.add(number)
        elif refilled == WRONG_SOURCE:  # not this queue's after all: leave it to its own
            passed.add(number)
        # -1: exported or refilled meanwhile, so no longer listed; look again


def maintain_project(
    client,
    project: str,
    directory: Path,
    holder: str | None = None,
    lease: Lease | None = None,
    cleanup: bool = False,
) -> dict | None:
    """Apply PROJECT's watermarks once; None when another maintainer holds its lease.

    Each shared queue is offloaded down to offload_high, or refilled from its own segments while
    below offload_low. With offloading off (high 0), every queue segment is refilled, so turning
    it off brings all back. With done_mode=offload, `done` is offloaded down to
    done_offload_high. CLEANUP also deletes stale unregistered files. A lost lease ends the
    pass early with "lease_lost" in the report (nothing half-done counts). Without HOLDER or
    LEASE, the call takes the lease for itself and gives it up when done.
    """
    k = keyspace.ProjectKeys(project)
    if lease is None and holder is None:
        lease = Lease(client, k)
        if not lease.take():
            return None
        try:
            return maintain_project(client, project, directory, lease=lease, cleanup=cleanup)
        finally:
            lease.release()
    lease = lease or Lease(client, k, holder)
    if not lease.take():
        return None
    values = client.hmget(
        k.settings, "offload_high", "offload_low", "offload_segment_items", "done_mode", "done_offload_high"
    )
    high, low, per_segment = (int(v or 0) for v in values[:3])
    per_segment = per_segment or 50_000
    low = min(low, high)
    done_mode = _text(values[3]) or "keep"
    done_high = int(values[4]) if values[4] is not None else 100_000
    report: dict = {"offloaded": 0, "refilled": 0}
    by_queue: dict = {}

    def count(queue, what, n):
        if n:
            by_queue.setdefault(queue, {}).setdefault(what, 0)
            by_queue[queue][what] += n
            report[what] += n

    try:
        if client.exists(k.offloading) or client.hexists(k.segment_queues, STAGED_FIELD):
            report["recovered"] = recover(client, k, directory, lease)
        if cleanup:
            removed = cleanup_files(client, k, directory)
            if removed:
                report["files_removed"] = removed
        skip: set = set()
        for queue in QUEUES:
            key = source_key(k, queue)
            excess = client.scard(key) - high
            if high > 0 and excess > 0:
                while excess > 0:
                    n = offload_one(client, k, directory, min(excess, per_segment), lease, queue)
                    if n == 0:
                        break
                    count(queue, "offloaded", n)
                    excess -= n
                continue
            while high == 0 or client.scard(key) < low:
                n = refill_one(client, k, directory, lease, queue, skip)
                if n < 0:
                    break
                count(queue, "refilled", n)
        if done_mode == "offload":
            excess = client.scard(k.done) - done_high
            while excess > 0:
                n = offload_one(client, k, directory, min(excess, per_segment), lease, DONE)
                if n == 0:
                    break
                report["done_offloaded"] = report.get("done_offloaded", 0) + n
                excess -= n
        if skip:
            report["unreadable_segments"] = sorted(skip)
        archive_log(client, k, directory, lease, cleanup, report)
    except (LeaseLost, log_archive.LogLeaseLost):
        report["lease_lost"] = True
    if set(by_queue) - {"todo"}:
        report["by_queue"] = by_queue
    return report


def archive_log(
    client, k: keyspace.ProjectKeys, directory: Path, lease: Lease, cleanup: bool, report: dict
) -> None:
    """The done log's step: entries beyond log_maxlen to segment files, then trimmed (see
    tracker_core.log_archive); CLEANUP also deletes its stale unregistered files."""
    if cleanup:
        removed = log_archive.cleanup(client, k, directory, min_age_s=STALE_FILE_S)
        if removed:
            report["log_files_removed"] = removed
    archived = log_archive.archive(client, k, directory, lease)
    if archived:
        report["log_archived"] = archived


def forget_project(client, project: str) -> None:
    """Called when PROJECT is deleted: a maintainer removes its segment files from disk."""
    client.sadd(keyspace.SEGMENTS_DELETED, project)


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
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.classified_ages: dict = {}
        self.cleaned_at: dict[str, float] = {}  # the first pass over a project cleans up
        self.stats_at: dict[str, float] = {}
        self.leases: dict[str, Lease] = {}
        self.unreadable: dict[str, list] = {}  # logged once, not every pass

    def _lease(self, project: str) -> Lease:
        if project not in self.leases:
            self.leases[project] = Lease(
                self.client, keyspace.ProjectKeys(project), self.holder, self.lease_ms
            )
        return self.leases[project]

    def remove_deleted_projects(self) -> list[str]:
        """Delete the segment folders of deleted projects (under their lease); return them."""
        removed = []
        for project in sorted(_text(p) for p in self.client.smembers(keyspace.SEGMENTS_DELETED)):
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
        return removed

    def pass_once(self) -> dict:
        """One pass over every project; per project its report, or why it was skipped.

        A project's own trouble (a full disk, a corrupt file) is reported under "error" and the
        pass goes on with the next; trouble with Redis itself propagates to the caller.
        """
        report: dict = {}
        self.remove_deleted_projects()
        for project in sorted(_text(p) for p in self.client.smembers(keyspace.PROJECTS)):
            try:
                report[project] = self._project(project)
            except (OSError, zstandard.ZstdError, scripts.ScriptError, OffloadError) as exc:
                report[project] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        return report

    def _project(self, project: str) -> dict:
        now = time.monotonic()
        cleanup = now - self.cleaned_at.get(project, -float("inf")) >= CLEANUP_EVERY_S
        lease = self._lease(project)
        moved = maintain_project(self.client, project, self.directory, lease=lease, cleanup=cleanup)
        if moved is None:
            return {"lease": "held elsewhere"}
        if cleanup:
            self.cleaned_at[project] = now
        if moved.get("lease_lost"):
            return moved
        k = keyspace.ProjectKeys(project)
        if self.reclassify:
            # A project whose settings moved since the last pass is reclassified: queued items
            # that a new or changed limit matches move to its sub-queue in the background.
            age = self.client.hget(k.settings, "settings_age")
            if age is not None and self.classified_ages.get(project) != age:
                moved["held"] = limits_mod.reclassify(self.client, k)
                self.classified_ages[project] = age
        if self.stats_upkeep and now - self.stats_at.get(project, -float("inf")) >= STATS_EVERY_S:
            from tracker_core import stats

            stats.upkeep(self.client, project, int(time.time() * 1000))
            self.stats_at[project] = now
        return moved

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
        try:
            while not stop.is_set():
                try:
                    report = self.pass_once()
                    failures = 0
                    delay = interval
                    for project, result in report.items():
                        if "error" in result:
                            self.log(f"tracker maintain: {project}: {result['error']}")
                        unreadable = result.get("unreadable_segments", [])
                        if unreadable and unreadable != self.unreadable.get(project):
                            self.log(
                                f"tracker maintain: {project}: segments {unreadable} have "
                                f"no readable file (left registered)"
                            )
                        self.unreadable[project] = unreadable
                except Exception as exc:  # noqa: BLE001 - the loop must outlive any one pass
                    failures += 1
                    delay = min(max_backoff_s, interval * 2 ** min(failures, 20))
                    line = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    self.log(f"tracker maintain: pass failed ({line}); next try in {delay:.1f}s")
                made += 1
                if passes is not None and made >= passes:
                    break
                stop.wait(delay)
        finally:
            self.release()

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


def export_segment(client, k: keyspace.ProjectKeys, directory: Path, number: int, destination: Path) -> int:
    """Take segment NUMBER out of the project into DESTINATION; return its item count.

    The export leaves a ticket (the digest of its items), so importing the file back brings the
    items back once, into the queue they came from.
    """
    source = segment_path(directory, k.project, number)
    if number not in registry(client, k) or not source.exists():
        raise OffloadError(f"no segment {number} in {k.project}")
    try:
        items = read_segment(source)
    except (OSError, zstandard.ZstdError) as exc:
        raise OffloadError(f"cannot read segment {number}: {exc}".splitlines()[0]) from None
    destination = Path(destination)
    write_segment(destination, items)
    n = scripts.run(
        client,
        "segment_export",
        (k.segments, k.segment_queues, k.segment_exports, k.stats),
        (number, items_digest(items)),
    )
    if n < 0:  # refilled or exported meanwhile: the items are elsewhere, so no copy stays out
        destination.unlink(missing_ok=True)
        raise OffloadError(f"no segment {number} in {k.project}")
    source.unlink(missing_ok=True)
    return n


def import_segment(
    client, k: keyspace.ProjectKeys, directory: Path, source: Path, queue: str = "todo"
) -> dict:
    """Bring a segment file (as export writes it) into the project.

    A file exported from this project comes back as a segment of the queue it left, once (its
    export ticket is used up). Any other file (another project's, a second import) has its items
    added through the project's Bloom filter into QUEUE, like `tracker items add`: items the
    project has seen (queued, claimed, done, offloaded) are dropped, so nothing is duplicated.
    Returns {"segment": number or None, "items": brought in, "duplicates": dropped}, plus
    "refused_not_utf8" when names of such a file were not valid UTF-8 (refused one by one and
    counted; an exported file comes back whole, as it left).
    """
    try:
        items = read_segment(Path(source))
    except (OSError, zstandard.ZstdError, UnicodeDecodeError) as exc:
        raise OffloadError(f"cannot read segment {source}: {exc}".splitlines()[0]) from None
    if not client.exists(k.settings):
        raise OffloadError(f"unknown project {k.project!r}")
    if queue not in QUEUES:
        raise OffloadError(f"import into todo, backfeed, secondary or redo, not {queue!r}")
    digest = items_digest(items)
    if items and client.hexists(k.segment_exports, digest):
        number = client.hincrby(k.segments, NEXT_FIELD, 1)
        path = segment_path(directory, k.project, number)
        write_segment(path, items)
        reply = scripts.run(
            client,
            "segment_import",
            (k.settings, k.segments, k.segment_queues, k.segment_exports, k.stats),
            (number, len(items), digest),
        )
        if reply == 1:
            return {"segment": number, "items": len(items), "duplicates": 0}
        path.unlink(missing_ok=True)
        if reply == -1:
            raise OffloadError(f"unknown project {k.project!r}")
    from tracker_core.admin import Admin, AdminError  # admin imports this module

    added = duplicates = 0
    refused: dict = {}
    try:
        for new, seen in Admin(client).add_items(k.project, items, queue=queue, refused=refused):
            if new < 0:
                raise OffloadError(f"unknown project {k.project!r}")
            added, duplicates = added + new, duplicates + seen
    except AdminError as exc:
        raise OffloadError(str(exc)) from None
    result = {"segment": None, "items": added, "duplicates": duplicates}
    if refused:
        result["refused_not_utf8"] = sum(refused.values())
    return result
