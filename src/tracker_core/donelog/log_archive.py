"""The done log as the record of the archive: every completion kept, the oldest on disk.

The done script appends one entry per done call with new items to the project's `log` stream
(downloader, ip, items, bytes, domains: bytes per domain, version, id, at). `tracker maintain`
keeps the newest `log_maxlen` entries (the watermark, default 100,000) in Redis and archives the
older ones, oldest first, to zstandard segment files of JSON lines, SEGMENTS_DIR/P/log/N.jsonl.zst
(at most SEGMENT_ENTRIES entries or about SEGMENT_BYTES of JSON each; an entry is never cut, it
is the record). Each shard of a sharded project has its own log and archive, shard I > 0 in
SEGMENTS_DIR/P.I/ (tracker_core.donelog.log_shards merges them for readers). Crash safety, entry by entry:
- the entries are read (never removed) and written to a new file: temp name, fsync, rename,
  directory fsync;
- only then one script (log_archive-4.lua) registers the file in `log_segments`, moves the
  '#archived' mark to its last entry and trims every entry up to it from the stream, checking
  under the maintain lease that the file continues the archive exactly (no entry skipped).
A crash before that script leaves the entries in the stream and an unregistered file, which the
next pass ignores (it writes the same entries again under a new number) and deletes once older
than offload.STALE_FILE_S. A crash after it has nothing left to do. So nothing is lost and
nothing is read twice: readers take the registered files, then the stream after '#archived'.

The done script cuts the stream only at a safety bound far above the watermark (when no
maintainer runs for a long time) and counts what that cut drops in stats log_entries_dropped.

`entries` and `export` stream every entry of a kind (done, or the capped uploads and bad_dones
streams, which are not archived: anyone can add to them, so writing them to disk without end
would let anyone fill it) in stream-id order, one segment file or stream batch in memory at a
time; `page` serves the admin API one bounded page after an opaque cursor (an entry id).
"""

from __future__ import annotations

import calendar
import io
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import zstandard

from tracker_core import keyspace, scripts
from tracker_core.donelog.log_records import (  # noqa: F401 - as log_archive named them
    Wanted,
    decode,
    encode,
    record,
)
from tracker_core.infra import durable
from tracker_core.project import settings_schema

KINDS = {"done": "log", "uploads": "uploads", "bad_dones": "bad_dones"}  # kind -> key attribute
ARCHIVED_KINDS = frozenset({"done"})
DEFAULT_WATERMARK = int(settings_schema.SETTINGS["log_maxlen"][1])  # log_maxlen's default
SEGMENT_ENTRIES = 50_000
SEGMENT_BYTES = 64 << 20  # JSON per file before compression (one entry may pass it)
READ_BATCH = 500  # entries per XRANGE: one done entry can be megabytes
PAGE_MAX = 1000  # entries per admin API page
PAGE_BYTES = 8 << 20  # JSON per page (at least one entry)
PAGE_SCAN = 100_000  # entries looked at per page when a filter skips most
# What an entry passed over by the item filter without decoding counts toward PAGE_SCAN: a byte
# search, about a tenth of decoding it (0.07 to 0.19: docs/performance.md, item_story_cost).
ITEM_SCAN_SHARE = 0.1
ZSTD_LEVEL = 3
ARCHIVED_FIELD, NEXT_FIELD = "#archived", "#next"
ENTRY_ID_RE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})\Z")
SECONDS_RE = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?\Z")

# A test's fault injection: called with the file's path once it is durable, before the script.
_after_write = None


class LogError(ValueError):
    """A bad log request (kind, time, cursor); the message is one line."""


class LogUnreadable(RuntimeError):
    """A registered log segment file is missing or unreadable here; the message is one line."""


class LogLeaseLost(RuntimeError):
    """The archive script was refused: the lease went elsewhere or the archive moved."""


def parse_id(entry_id: str) -> tuple[int, int]:
    match = ENTRY_ID_RE.match(entry_id or "")
    if not match:
        raise LogError(f"bad log cursor {str(entry_id)[:40]!r}: an entry id is MS-SEQ")
    return int(match[1]), int(match[2])


def _id_text(position: tuple[int, int]) -> str:
    return f"{position[0]}-{position[1]}"


def parse_since(text) -> int:
    """A start time as ms since the epoch: Unix seconds, or an ISO 8601 date or time (UTC if
    no offset is given)."""
    text = str(text).strip()
    if SECONDS_RE.match(text):
        return int(float(text) * 1000)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LogError(f"bad time {text[:40]!r}: give Unix seconds or an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000


def log_dir(directory: Path, project: str) -> Path:
    return Path(directory) / project / "log"


def segment_path(directory: Path, project: str, number: int) -> Path:
    return log_dir(directory, project) / f"{number}.jsonl.zst"


# -- segment files ------------------------------------------------------------------------------


def write_lines(path: Path, lines: list[bytes]) -> None:
    """Write LINES (JSON, newline-ended, zstandard) durably: temp, fsync, rename, fsync dir."""

    def write(f) -> None:
        with zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(f, closefd=False) as z:
            for line in lines:
                z.write(line)
                z.write(b"\n")

    durable.write_file(path, write)


def read_lines(path: Path) -> Iterator[dict]:
    """The records of one segment file, one line in memory at a time."""
    try:
        with open(path, "rb") as f:
            reader = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(f), 1 << 20)
            for line in reader:
                if line.strip():
                    yield decode(line)
    except (OSError, zstandard.ZstdError, ValueError) as exc:
        raise LogUnreadable(f"cannot read log segment {path}: {exc}".splitlines()[0]) from None


def registry(client, k: keyspace.ProjectKeys) -> list[tuple[int, str, str, int]]:
    """Registered segments, oldest first: (number, first id, last id, entries)."""
    out = []
    for field, value in client.hgetall(k.log_segments).items():
        if not field.startswith("#"):
            first, last, entries = value.split(" ")
            out.append((int(field), first, last, int(entries)))
    return sorted(out, key=lambda s: parse_id(s[1]))


def archived_id(client, k: keyspace.ProjectKeys) -> str | None:
    return client.hget(k.log_segments, ARCHIVED_FIELD)


def watermark(client, k: keyspace.ProjectKeys) -> int:
    value = client.hget(k.settings, "log_maxlen")
    try:
        return max(0, int(value)) if value is not None else DEFAULT_WATERMARK
    except ValueError:
        return DEFAULT_WATERMARK


# -- archiving (tracker maintain, under the project's lease) -----------------------------------


def _collect(client, key: str, after: str | None, wanted: int, max_bytes: int):
    """The oldest entries after AFTER as JSON lines: up to WANTED, about MAX_BYTES at most."""
    lines: list[bytes] = []
    first, last, size = None, None, 0
    start = f"({after}" if after else "-"
    while len(lines) < wanted and size < max_bytes:
        batch = client.xrange(key, min=start, max="+", count=min(READ_BATCH, wanted - len(lines)))
        if not batch:
            break
        for entry_id, fields in batch:
            line = encode(record("done", entry_id, fields))
            lines.append(line)
            first, last, size = first or entry_id, entry_id, size + len(line) + 1
            if size >= max_bytes:
                break
        start = f"({last}"
    return lines, first, last


def archive(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    lease,
    keep: int | None = None,
    per_segment: int = SEGMENT_ENTRIES,
    max_bytes: int = SEGMENT_BYTES,
) -> int:
    """Archive the done log's entries beyond KEEP (log_maxlen) to segment files; how many.

    LEASE is the project's offload.Lease; LogLeaseLost when a script refuses (nothing of that
    segment counts: its file stays unregistered and is deleted later).
    """
    keep = watermark(client, k) if keep is None else keep
    archived_total = 0
    while True:
        excess = client.xlen(k.log) - keep
        if excess <= 0:
            return archived_total
        lines, first, last = _collect(
            client, k.log, archived_id(client, k), min(excess, per_segment), max_bytes
        )
        if not lines:
            return archived_total
        lease.keep()
        number = client.hincrby(k.log_segments, NEXT_FIELD, 1)
        path = segment_path(directory, k.project, number)
        write_lines(path, lines)
        if _after_write is not None:
            _after_write(path)
        lease.keep()
        code, _trimmed = scripts.log_archive(
            client, k, holder=lease.holder, number=number, first_id=first, last_id=last, entries=len(lines)
        )
        if code != scripts.log_archive.codes.REGISTERED:
            raise LogLeaseLost(f"the log archive of {k.project} was refused ({code})")
        archived_total += len(lines)


def cleanup(
    client, k: keyspace.ProjectKeys, directory: Path, now_s: float | None = None, min_age_s: float = 600
) -> int:
    """Delete log files no registered segment names, once older than MIN_AGE_S (a younger one
    may be a pass between its write and its script)."""
    folder = log_dir(directory, k.project)
    if not folder.is_dir():
        return 0
    paths = list(folder.iterdir())
    registered = {f"{n}.jsonl.zst" for n, *_ in registry(client, k)}
    now_s = time.time() if now_s is None else now_s
    removed = 0
    for path in paths:
        if path.name in registered:
            continue
        try:
            if now_s - path.stat().st_mtime > min_age_s:
                path.unlink()
                removed += 1
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            pass
    return removed


# -- reading ------------------------------------------------------------------------------------


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


def _scan(
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
    for entry_id, rec, _looked_at in _scan(client, k, directory, kind, since_ms, after, wanted):
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
    for entry_id, rec, _looked_at in _scan(client, k, directory, "done", None, None, wanted):
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
    scan = _scan(client, k, directory, kind, since_ms, cursor, wanted)
    return collect_page(scan, kind, downloader, wanted, limit, max_bytes, max_scan)


def collect_page(scan, kind, downloader, wanted, limit, max_bytes, max_scan, ties=False) -> dict:
    """page's answer from SCAN (what _scan yields); with TIES (several shards' entries merged,
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


def status(client, k: keyspace.ProjectKeys) -> dict:
    """What the archive holds: segments, entries on disk and in Redis, entries dropped."""
    segments = registry(client, k)
    return {
        "segments": len(segments),
        "archived_entries": sum(s[3] for s in segments),
        "stream_entries": client.xlen(k.log),
        "archived_up_to": archived_id(client, k),
        "dropped_entries": int(client.hget(k.stats, "log_entries_dropped") or 0),
    }
