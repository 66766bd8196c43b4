"""A sharded project's done log (docs/sharding.md): each shard keeps, archives and trims its own
(tracker_core.donelog.log_archive, under that shard's lease); readers merge the shards in time order.

Shard 0's segment files are where a one-shard project's are (DIR/P/log/N.jsonl.zst); shard I's
are under its own folder, DIR/P.I (tracker_core.offload.segment_file.shard_directory), so numbers never collide.
Entries are merged by their stream ids (Redis's time of the entry on its shard: ms, then
sequence), shard order breaking ties. A page's cursor is an entry id, as for one shard: every
shard goes on after it, so a page never ends between entries of equal id on two shards (it takes
them all). A one-shard project never comes here.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from pathlib import Path

from tracker_core.donelog import log_archive, log_reader
from tracker_core.offload.segment_file import shard_directory
from tracker_core.project.shard_layout import ShardLayout, summed


def _places(layout: ShardLayout, directory: Path) -> list[tuple]:
    return [(k, shard_directory(directory, layout.project, i)) for i, k in enumerate(layout.keys)]


def _merged(client, layout: ShardLayout, directory: Path, kind, since_ms, after, wanted) -> Iterator[tuple]:
    """(entry id, record or None, entries looked at) of every shard (log_reader.scan_entries), in
    entry id order."""

    def keyed(index, scan):
        for entry_id, rec, looked_at in scan:
            yield log_archive.parse_id(entry_id), index, entry_id, rec, looked_at

    scans = [
        keyed(i, log_reader.scan_entries(client, k, d, kind, since_ms, after, wanted))
        for i, (k, d) in enumerate(_places(layout, directory))
    ]
    for _position, _index, entry_id, rec, looked_at in heapq.merge(*scans):
        yield entry_id, rec, looked_at


def export(
    client, layout: ShardLayout, directory: Path, out, kind="done", since_ms=None, downloader=None, item=None
) -> int:
    """log_reader.export over every shard of LAYOUT, in time order; how many written."""
    wanted = None if item is None else log_archive.Wanted([item])
    written = 0
    for _entry_id, rec, _looked_at in _merged(client, layout, directory, kind, since_ms, None, wanted):
        if rec is not None and log_reader.matches(kind, rec, downloader, wanted):
            out.write(log_archive.encode(rec) + b"\n")
            written += 1
    return written


def page(
    client,
    layout: ShardLayout,
    directory: Path,
    kind="done",
    since_ms=None,
    downloader=None,
    cursor=None,
    **options,
) -> dict:
    """log_reader.page over every shard of LAYOUT, in time order (see the module's docstring
    for the cursor); OPTIONS: limit, max_bytes, max_scan, item, as log_reader.page takes them."""
    item = options.get("item")
    wanted = None if item is None else log_archive.Wanted([item])
    scan = _merged(client, layout, directory, kind, since_ms, cursor, wanted)
    limits = (
        options.get("limit", 100),
        options.get("max_bytes", log_reader.PAGE_BYTES),
        options.get("max_scan", log_reader.PAGE_SCAN),
    )
    return log_reader.collect_page(scan, kind, downloader, wanted, *limits, ties=True)


def status(client, layout: ShardLayout) -> dict:
    """log_archive.status of every shard added up ("archived_up_to": the first shard's), with
    each shard's own under "shards"."""
    parts = [log_archive.status(client, k) for k in layout.keys]
    return {**summed([dict(p) for p in parts]), "shards": parts}


def naming(client, layout: ShardLayout, directory: Path, names, deadline: float | None = None):
    """log_reader.naming over every shard of LAYOUT (each done entry names items of its own
    shard): each name's entries oldest first by entry id; the second value is the last entry id
    read of the first shard whose pass stopped at DEADLINE (None: none stopped)."""
    found: dict[str, list[dict]] = {}
    stopped = None
    for k, d in _places(layout, directory):
        part, cut = log_reader.naming(client, k, d, names, deadline)
        for name, records in part.items():
            found.setdefault(name, []).extend(records)
        stopped = stopped or cut
    for records in found.values():
        records.sort(key=lambda rec: log_archive.parse_id(rec.get("entry", "")))
    return found, stopped
