"""Staging and refill: move items between a queue (or done) and segment files, crash-safely.

- offload: items move queue -> `offloading` (one script, which also reserves the segment number
  and records it with the source as '#staged'); the file is written to a temp name, fsynced,
  renamed, the directory fsynced; only then one script registers the segment and drops
  `offloading`. A crash before that leaves the items in `offloading` (counted as offloaded):
  `recover` puts them back into their queue, a bounded chunk per script, and deletes the file.
- refill: the file is read, one script puts its items into their queue and unregisters the
  segment; only then is the file deleted. A crash in between leaves an unregistered file.
- Unregistered files (a crash, a lost lease, a failed unlink) are deleted by `cleanup_files` once
  older than STALE_FILE_S (younger ones may be an import between its file and its registration).
"""

from __future__ import annotations

import time
from pathlib import Path

from tracker_core import keyspace, scripts
from tracker_core.offload.lease import Lease, LeaseLost, held_or_taken
from tracker_core.offload.segment_file import UNREADABLE, read_segment, segment_path, write_segment
from tracker_core.offload.segment_registry import OffloadError, registry, segment_sources, source_key, staged

STALE_FILE_S = 600  # unregistered files younger than this may be an import in progress
ABORT_CHUNK = 10_000  # items put back per script: Redis stays responsive during a recovery
ENOUGH = -2  # refill_one: the queue held what the caller refills it to; nothing moved


def remove_number(directory: Path, project: str, number: int) -> None:
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
    lease = held_or_taken(client, k, lease)
    number, source = staged(client, k)
    restored = 0
    while True:
        lease.keep()
        moved, left = lease.checked(
            scripts.offload_abort(
                client,
                k,
                holder=lease.holder,
                source=source,
                source_key=source_key(k, source),
                most=ABORT_CHUNK,
            )
        )
        if (
            moved == scripts.offload_abort.codes.WRONG_SOURCE
        ):  # restaged in between (not under our lease): look again
            number, source = staged(client, k)
            continue
        restored += moved
        if left == 0:
            break
    if number is not None:
        remove_number(directory, k.project, number)
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
    lease = held_or_taken(client, k, lease)
    lease.keep()
    reply = lease.checked(
        scripts.offload_stage(
            client, k, holder=lease.holder, source=source, source_key=source_key(k, source), count=count
        )
    )
    if reply.code == scripts.offload_stage.codes.PENDING:
        raise OffloadError(f"an earlier offload of {k.project} is unfinished (recover it first)")
    if reply.code == scripts.offload_stage.codes.EMPTY:
        return 0
    if reply.code < 0:  # a bad count or '#next': refused before anything moved
        raise OffloadError(f"offload of {k.project} refused by Redis ({reply.code})")
    number, items = reply.code, list(reply.items)
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
        scripts.offload_commit(client, k, holder=lease.holder, number=number, count=len(items), source=source)
    )
    if (
        done != scripts.offload_commit.codes.COMMITTED
    ):  # someone else aborted our staging: our file stays unregistered
        raise LeaseLost(f"the staged set of {k.project} changed under this maintainer")
    return len(items)


def refill_one(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    lease: Lease | None = None,
    queue: str = "todo",
    skip: set | None = None,
    sources: dict[int, str] | None = None,
    below: int | None = None,
) -> int:
    """Put QUEUE's oldest readable segment back into QUEUE; return its items (-1: none left;
    ENOUGH: the queue held BELOW items or more, nothing moved).

    Segments whose file is missing or unreadable are added to SKIP (and left registered, still
    counted, for an admin to look at), so one bad file does not stop the refill of the others.
    SOURCES: the registry as the caller read it (segment_sources), kept right here (a refilled
    segment leaves it; read again when a segment went meanwhile, or none is left in it), so a
    caller refilling several, or again later, need not read it for each. BELOW: checked by the
    refill script in the step that refills, so the queue is never refilled past it whoever else
    refills at once.
    """
    lease = held_or_taken(client, k, lease)
    skip = set() if skip is None else skip
    fresh = sources is None
    known = segment_sources(client, k) if sources is None else sources
    passed: set = set()
    while True:
        numbers = sorted(n for n, q in known.items() if q == queue and n not in skip and n not in passed)
        if not numbers and not fresh:  # registered since the caller read it, perhaps
            _read_again(client, k, known)
            fresh = True
            continue
        if not numbers:
            return -1
        number = numbers[0]
        path = segment_path(directory, k.project, number)
        try:
            items = read_segment(path)
        except UNREADABLE:
            if client.hexists(k.segments, number):
                skip.add(number)
            else:  # refilled or exported since SOURCES was read: gone, not unreadable
                known.pop(number, None)
            continue
        lease.keep()
        refilled = lease.checked(
            scripts.refill(
                client,
                k,
                holder=lease.holder,
                number=number,
                queue=queue,
                queue_key=source_key(k, queue),
                items=[scripts.wire(i) for i in items],
                below=below,
            )
        )
        if refilled >= 0:
            path.unlink(missing_ok=True)
            known.pop(number, None)
            return refilled
        if refilled == scripts.refill.codes.ENOUGH:
            return ENOUGH
        if refilled == scripts.refill.codes.BAD_COUNT:
            skip.add(number)
        elif refilled == scripts.refill.codes.WRONG_SOURCE:  # not this queue's after all: leave it to its own
            passed.add(number)
        else:  # NOT_REGISTERED: exported or refilled meanwhile; read the registry again
            _read_again(client, k, known)
            fresh = True


def _read_again(client, k: keyspace.ProjectKeys, known: dict) -> None:
    """KNOWN (a caller's copy of the registry) as the registry is now."""
    now = segment_sources(client, k)
    known.clear()
    known.update(now)
