"""Offloading: move the excess of long queues (and of `done`) to zstandard segment files, and refill.

`tracker maintain` runs a `Maintainer` on every node. Per project, each of the shared queues
(todo, todo:backfeed, todo:secondary, todo:redo) whose size passes `offload_high` has its excess
written to segment files; a queue that falls below `offload_low` gets its own segments back,
oldest first. With `done_mode=offload`, `done` beyond `done_offload_high` goes to segment files
too; those stay on disk (they are done, not work: never refilled, counted in `tracker status`).
The done log's entries beyond log_maxlen are archived under the same lease, in SEGMENTS_DIR/P/log/
(tracker_core.log_archive: the same write-fsync-then-register rule).

The package, one concern per module:
- `segment_file`: the file format (NUL-separated names, zstandard), paths, the items' digest;
- `segment_registry`: the registry in Redis (which segments count, their sources, counts);
- `lease`: one maintainer at a time per project (`Lease`, `LeaseLost`);
- `staging`: offload_one, refill_one, recover and cleanup_files (the crash-safety below);
- `transfer`: export and import of segment files;
- `demand`: refill on demand (claims ask, the maintainer's refiller thread refills at once);
- `steps`: the named steps of a project's pass (`ProjectPass`, `Watermarks`);
- `shards`: a sharded project's pass (every shard's steps, per-shard folders, shard shares);
- `maintenance`: the `Maintainer` loop.

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
  segment; only then is the file deleted. A crash in between leaves an unregistered file. A
  queue is refilled by each pass while below its target (offload_low, or more while claims
  drain it fast), and between passes as soon as a claim asks (`demand`).
- Unregistered files (left by a crash, a lost lease, or a failed unlink) are deleted when a
  maintainer starts and every STALE_FILE_S after, once older than STALE_FILE_S (younger ones
  may be an import between writing its file and registering it). Files of deleted projects go
  too (`tracker project delete` leaves a tombstone in SEGMENTS_DELETED).
The registry (`segments` hash: number -> items) decides which files count.

Item status (`GET /P/items/NAME.json`, item_status.py) does not open segment files: an item on
its way to a segment is "offloaded", and a name found nowhere while the project has segment files
is answered with `maybe: ["offloaded"]`. Answering from disk would cost a scan of every segment;
the Bloom filter only knows "seen", not where.

Every public name is reachable as `offload.NAME` and loads its module on first use (PEP 562),
so importing `tracker_core.offload.segment_registry` alone (the registry's vocabulary) costs only
`keys`, and no module that offload imports can close an import circle through this package.
"""

from __future__ import annotations

import importlib

# Where each public name lives (module of this package).
_HOMES = {
    "segment_file": ("ZSTD_LEVEL", "items_digest", "read_segment", "segment_path", "write_segment"),
    "segment_registry": (
        "DONE",
        "NEXT_FIELD",
        "QUEUES",
        "STAGED_FIELD",
        "OffloadError",
        "forget_project",
        "offloaded_count",
        "registry",
        "segment_sources",
        "source_key",
        "staged",
    ),
    "lease": ("LEASE_MS", "NOT_HOLDER", "Lease", "LeaseLost", "default_holder"),
    "staging": ("ABORT_CHUNK", "STALE_FILE_S", "cleanup_files", "offload_one", "recover", "refill_one"),
    "transfer": ("export_segment", "import_segment"),
    "demand": ("READ_AHEAD_S", "DrainMeter", "RefillDemand", "Refiller", "write_watch"),
    "maintenance": (
        "CLEANUP_EVERY_S",
        "OFFLOAD_STEPS",
        "STATS_EVERY_S",
        "STEPS",
        "Maintainer",
        "ProjectPass",
        "Watermarks",
        "maintain_once",
        "maintain_project",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    if name in _HOMES:  # a module of the package: offload.staging
        return importlib.import_module(f"{__name__}.{name}")
    if name in _HOME_OF:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME_OF[name]}"), name)
        globals()[name] = value  # found once, then an ordinary attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES, *_HOME_OF])
