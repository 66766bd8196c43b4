"""Read the done log, and the uploads and bad_dones streams, in order: files, then the stream.

`entries` and `export` stream every entry of a kind in stream-id order, one segment file or
stream batch in memory at a time; `page` serves the admin API one bounded page after an opaque
cursor (an entry id); `naming` finds the done entries that name given items. The done log's
registered segment files (log_archive.py) come first, then its stream after '#archived'.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import zstandard

from tracker_core import keyspace
from tracker_core.donelog.log_archive import (
    ARCHIVED_KINDS,
    KINDS,
    READ_BATCH,
    LogError,
    LogUnreadable,
    archived_id,
    parse_id,
    read_lines,
    registry,
    segment_path,
)
from tracker_core.donelog.log_records import Wanted, decode, encode, record

PAGE_MAX = 1000  # entries per admin API page
PAGE_BYTES = 8 << 20  # JSON per page (at least one entry)
PAGE_SCAN = 100_000  # entries looked at per page when a filter skips most
# What an entry passed over by the item filter without decoding counts toward PAGE_SCAN: a byte
# search, about a tenth of decoding it (0.07 to 0.19: docs/performance.md, item_story_cost).
ITEM_SCAN_SHARE = 0.1


def _id_text(position: tuple[int, int]) -> str:
    return f"{position[0]}-{position[1]}"


def _stream_start(position) -> str:
    if position is None:
        return "-"
    if position[1] < 0:  # "from ms on", inclusive
        return f"{position[0]}-0"
    return f"({_id_text(position)}"


def _file_records(path: Path, wanted: Wanted | None) -> Iterator[tuple[dict | None, int]]:
    """(record, entries passed over before it) of one segment file; with WANTED only the
    records that may name one of its names, and at the end (None, entries passed over)."""
    if wanted is None:
        for rec in read_lines(path):
            yield rec, 0
        return
    try:
        with open(path, "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
    except (OSError, zstandard.ZstdError) as exc:
        raise LogUnreadable(f"cannot read log segment {path}: {exc}".splitlines()[0]) from None
    lines = data.split(b"\n")
    if not wanted.may_name(data):
        yield None, sum(1 for line in lines if line.strip())
        return
    passed = 0
    for line in lines:
        if not line.strip():
            continue
        if not wanted.may_name(line):
            passed += 1
            continue
        try:
            rec = decode(line)
        except ValueError as exc:
            raise LogUnreadable(f"cannot read log segment {path}: {exc}".splitlines()[0]) from None
        yield rec, passed
        passed = 0
    yield None, passed


def scan_entries(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    kind: str,
    since_ms: int | None,
    after: str | None,
    wanted: Wanted | None,
) -> Iterator[tuple[str, dict | None, int]]:
    """(entry id, record, entries looked at) in order, as `entries` describes; with WANTED the
    record is None for what was passed over (ID: the last entry of it), so a caller counting
    entries looked at (page) can stop anywhere and continue after ID."""
    if kind not in KINDS:
        raise LogError(f"unknown log {kind!r}: done, uploads or bad_dones")
    key = getattr(k, KINDS[kind])
    position = parse_id(after) if after else None
    if since_ms is not None and (position is None or position < (since_ms, -1)):
        position = (since_ms, -1)
    while True:
        if kind in ARCHIVED_KINDS:
            for number, _first, last, _n in registry(client, k):
                if position is not None and parse_id(last) <= position:
                    continue
                path = segment_path(directory, k.project, number)
                if not path.exists():
                    raise LogUnreadable(
                        f"log segment {number} of {k.project} is not in "
                        f"{directory} (give the segments directory)"
                    )
                passed = 0
                for rec, skipped in _file_records(path, wanted):
                    passed += skipped
                    if rec is None:  # the rest of the file, passed over
                        if passed and (position is None or parse_id(last) > position):
                            position = parse_id(last)
                            yield last, None, passed
                        continue
                    at = parse_id(rec.get("entry", ""))
                    if position is None or at > position:
                        position = at
                        yield rec["entry"], rec, passed + 1
                        passed = 0
        moved = False
        while not moved:
            batch = client.xrange(key, min=_stream_start(position), max="+", count=READ_BATCH)
            if kind in ARCHIVED_KINDS:
                mark = archived_id(client, k)  # read after the batch: see the docstring
                moved = mark is not None and (position is None or parse_id(mark) > position)
                if moved:
                    break
            if not batch:
                return
            for entry_id, fields in batch:
                position = parse_id(entry_id)
                text = fields.get("item" if kind == "uploads" else "items", "")
                if wanted is not None and not wanted.may_name_text(text):
                    yield entry_id, None, 1
                else:
                    yield entry_id, record(kind, entry_id, fields), 1


def entries(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    kind: str = "done",
    since_ms: int | None = None,
    after: str | None = None,
    wanted: Wanted | None = None,
) -> Iterator[tuple[str, dict]]:
    """Every entry of KIND after AFTER (an entry id) and from SINCE_MS on, oldest first, as
    (entry id, record): the registered segment files, then the stream. With WANTED, at least
    the entries that name one of its names (others may come too: `matches` decides).

    Stream ids are Redis's time of the entry, so order and SINCE_MS follow them. An archive
    pass running meanwhile is followed: when '#archived' passed what was read, the new
    segment is read before the stream goes on, so no entry is missed or repeated.
    """
    for entry_id, rec, _looked_at in scan_entries(client, k, directory, kind, since_ms, after, wanted):
        if rec is not None:
            yield entry_id, rec


def matches(kind: str, rec: dict, downloader: str | None, wanted: Wanted | None = None) -> bool:
    if wanted is not None and not wanted.named(kind, rec):
        return False
    if downloader is None:
        return True
    return rec.get("uploader" if kind == "uploads" else "downloader") == downloader


def export(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    out,
    kind: str = "done",
    since_ms: int | None = None,
    downloader: str | None = None,
    item: str | None = None,
) -> int:
    """Write KIND's entries (filtered: from SINCE_MS, by DOWNLOADER, naming ITEM) to the binary
    stream OUT as JSON lines; how many."""
    wanted = None if item is None else Wanted([item])
    written = 0
    for _entry_id, rec in entries(client, k, directory, kind, since_ms, wanted=wanted):
        if matches(kind, rec, downloader, wanted):
            out.write(encode(rec) + b"\n")
            written += 1
    return written


def naming(
    client, k: keyspace.ProjectKeys, directory: Path, names, deadline: float | None = None
) -> tuple[dict[str, list[dict]], str | None]:
    """Every done entry that names each of NAMES, oldest first: one pass over the whole done
    log (segment files skipped whole, at C speed, when they cannot name one). Past DEADLINE
    (time.monotonic()) the pass stops: the second value is then the last entry id read."""
    wanted = Wanted(names)
    found: dict[str, list[dict]] = {name: [] for name in wanted.names}
    for entry_id, rec, _looked_at in scan_entries(client, k, directory, "done", None, None, wanted):
        if rec is not None:
            for name in wanted.named("done", rec):
                found[name].append(rec)
        if deadline is not None and time.monotonic() > deadline:
            return found, entry_id
    return found, None


def page(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    kind: str = "done",
    since_ms: int | None = None,
    downloader: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
    max_bytes: int = PAGE_BYTES,
    max_scan: int = PAGE_SCAN,
    item: str | None = None,
) -> dict:
    """One page: {"entries": [...], "cursor": the id to continue after, or None at the end}.

    A page ends at LIMIT entries, about MAX_BYTES of JSON, or MAX_SCAN entries looked at (a
    filter that skips most entries still answers in bounded time, with a cursor to go on). With
    ITEM, entries passed over without decoding count at an ITEM_SCAN_SHARE of one: a whole file
    that cannot name it costs a decompression and a byte search.
    """
    wanted = None if item is None else Wanted([item])
    scan = scan_entries(client, k, directory, kind, since_ms, cursor, wanted)
    return collect_page(scan, kind, downloader, wanted, limit, max_bytes, max_scan)


def collect_page(scan, kind, downloader, wanted, limit, max_bytes, max_scan, ties=False) -> dict:
    """page's answer from SCAN (what scan_entries yields); with TIES (several shards' entries merged,
    tracker_core.donelog.log_shards) a full page also takes the entries of its last id that follow."""
    found, size, scanned, full_at = [], 0, 0.0, None
    for entry_id, rec, looked_at in scan:
        if full_at is not None and entry_id != full_at:
            break
        if rec is None:
            scanned += looked_at * ITEM_SCAN_SHARE
        else:
            scanned += looked_at
            if matches(kind, rec, downloader, wanted):
                found.append(rec)
                size += len(encode(rec))
        if full_at is None and (len(found) >= limit or size >= max_bytes or scanned >= max_scan):
            full_at = entry_id
            if not ties:
                break
    return {"entries": found, "cursor": full_at}
