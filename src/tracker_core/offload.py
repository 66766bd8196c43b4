"""Offloading: move the excess of a long `todo` to zstandard segment files, and refill it.

`tracker maintain` runs `maintain_once` in a loop on every node; a lease in Redis lets one of
them move segments at a time. The segment directory must be the same storage for every node
that may hold the lease (a shared mount, or run maintain on one node only).

Crash safety, item by item (every item is always in exactly one counted place):
- offload: items move todo -> `offloading` (Redis, one script); the file is written to a temp
  name, fsynced, renamed, the directory fsynced; only then one script registers the segment and
  drops `offloading`. A crash before that leaves the items in `offloading`: the next pass puts
  them back into todo and the unregistered file is deleted later.
- refill: the file is read, one script puts its items into todo and unregisters the segment;
  only then is the file deleted. A crash in between leaves an unregistered file, deleted later.
The registry (`segments` hash: number -> items) decides which files count.
"""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import zstandard

from tracker_core import keys as keyspace
from tracker_core import limits as limits_mod
from tracker_core import scripts

LEASE_MS = 30_000
STALE_FILE_S = 600   # unregistered files younger than this may be an import in progress
NEXT_FIELD = "#next"
ZSTD_LEVEL = 3


class OffloadError(ValueError):
    """A bad segment request; the message is one line."""


def segment_path(directory: Path, project: str, number: int) -> Path:
    return Path(directory) / project / f"{number}.zst"


def write_segment(path: Path, items: list[str]) -> None:
    """Write ITEMS (NUL-separated, zstandard) durably: temp file, fsync, rename, fsync dir."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(
        "\0".join(items).encode("utf-8", "surrogateescape"))
    temp = path.with_suffix(f".{uuid.uuid4().hex}.part")
    with open(temp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_segment(path: Path) -> list[str]:
    with open(path, "rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read()
    text = data.decode("utf-8", "surrogateescape")
    return text.split("\0") if text else []


def registry(client, k: keyspace.ProjectKeys) -> dict[int, int]:
    """Registered segments: number -> items."""
    return {int(n): int(c) for n, c in client.hgetall(k.segments).items()
            if n not in (NEXT_FIELD, NEXT_FIELD.encode())}


def offloaded_count(client, k: keyspace.ProjectKeys) -> int:
    return sum(registry(client, k).values()) + client.scard(k.offloading)


def take_lease(client, holder: str, lease_ms: int = LEASE_MS) -> bool:
    return scripts.run(client, "maintain_lease", (keyspace.MAINTAIN_LEASE,), (holder, lease_ms)) == 1


def recover(client, k: keyspace.ProjectKeys, directory: Path, now_s: float | None = None) -> int:
    """Finish what a crash interrupted: put staged items back; delete stale unregistered files."""
    restored = scripts.run(client, "offload_abort", (k.offloading, k.todo), ())
    registered = registry(client, k)
    now_s = time.time() if now_s is None else now_s
    folder = Path(directory) / k.project
    if folder.is_dir():
        for path in folder.iterdir():
            stem = path.name.split(".", 1)[0]
            if stem.isdigit() and path.name.endswith(".zst") and int(stem) in registered:
                continue
            if now_s - path.stat().st_mtime > STALE_FILE_S:
                path.unlink()
    return restored


def offload_one(client, k: keyspace.ProjectKeys, directory: Path, count: int) -> int:
    """Move up to COUNT todo items into a new segment file; return how many moved."""
    staged = scripts.run(client, "offload_stage", (k.todo, k.offloading), (count,))
    if staged <= 0:
        return 0
    number = client.hincrby(k.segments, NEXT_FIELD, 1)
    items = [i.decode("utf-8", "surrogateescape") if isinstance(i, bytes) else i
             for i in client.smembers(k.offloading)]
    write_segment(segment_path(directory, k.project, number), items)
    if scripts.run(client, "offload_commit", (k.offloading, k.segments, k.stats),
                   (number, len(items))) != 1:
        raise RuntimeError("the offloading set changed under the maintainer (is the lease shared?)")
    return len(items)


def refill_one(client, k: keyspace.ProjectKeys, directory: Path) -> int:
    """Put the oldest registered segment back into todo; return its items (-1: none left)."""
    registered = registry(client, k)
    if not registered:
        return -1
    number = min(registered)
    path = segment_path(directory, k.project, number)
    items = read_segment(path)
    refilled = scripts.run(client, "refill", (k.segments, k.todo, k.stats), (number, *items))
    if refilled >= 0:
        path.unlink()
    return refilled


def maintain_project(client, project: str, directory: Path) -> dict:
    """Apply PROJECT's watermarks once: offload todo's excess above high, refill below low.

    With offloading off (high 0), every segment is refilled, so turning it off brings all back.
    """
    k = keyspace.ProjectKeys(project)
    values = client.hmget(k.settings, "offload_high", "offload_low", "offload_segment_items")
    high, low, per_segment = (int(v or 0) for v in values)
    per_segment = per_segment or 50_000
    moved = {"offloaded": 0, "refilled": 0}
    if client.scard(k.offloading):
        recover(client, k, directory)
    excess = client.scard(k.todo) - high
    if high > 0 and excess > 0:
        while excess > 0:
            n = offload_one(client, k, directory, min(excess, per_segment))
            if n == 0:
                break
            moved["offloaded"] += n
            excess -= n
        return moved
    while (high == 0 or client.scard(k.todo) < low) and registry(client, k):
        n = refill_one(client, k, directory)
        if n < 0:
            break
        moved["refilled"] += n
    return moved


def maintain_once(client, holder: str, directory: Path,
                  classified_ages: dict | None = None) -> dict | None:
    """One maintenance pass over every project; None when another node holds the lease.

    With CLASSIFIED_AGES (project -> settings age last reclassified, kept by the caller), a
    project whose settings moved since is reclassified: queued items that a new or changed
    limit matches move to its sub-queue in the background.
    """
    if not take_lease(client, holder):
        return None
    report = {}
    for project in sorted(client.smembers(keyspace.PROJECTS)):
        report[project] = maintain_project(client, project, directory)
        if classified_ages is not None:
            k = keyspace.ProjectKeys(project)
            age = client.hget(k.settings, "settings_age")
            if age is not None and classified_ages.get(project) != age:
                report[project]["held"] = limits_mod.reclassify(client, k)
                classified_ages[project] = age
    return report


def export_segment(client, k: keyspace.ProjectKeys, directory: Path, number: int,
                   destination: Path) -> int:
    """Take segment NUMBER out of the project into DESTINATION; return its item count."""
    source = segment_path(directory, k.project, number)
    if number not in registry(client, k) or not source.exists():
        raise OffloadError(f"no segment {number} in {k.project}")
    write_segment(Path(destination), read_segment(source))
    n = scripts.run(client, "segment_export", (k.segments, k.stats), (number,))
    if n < 0:
        raise OffloadError(f"no segment {number} in {k.project}")
    source.unlink()
    return n


def import_segment(client, k: keyspace.ProjectKeys, directory: Path, source: Path) -> tuple[int, int]:
    """Bring a segment file (as export writes it) into the project; return (number, items)."""
    try:
        items = read_segment(Path(source))
    except (OSError, zstandard.ZstdError) as exc:
        raise OffloadError(f"cannot read segment {source}: {exc}".splitlines()[0]) from None
    number = client.hincrby(k.segments, NEXT_FIELD, 1)
    write_segment(segment_path(directory, k.project, number), items)
    if scripts.run(client, "segment_import", (k.settings, k.segments, k.stats),
                   (number, len(items))) != 1:
        raise OffloadError(f"unknown project {k.project!r}")
    return number, len(items)
