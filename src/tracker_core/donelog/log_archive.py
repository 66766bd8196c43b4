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

Only the done log is archived: the capped uploads and bad_dones streams are not (anyone can add
to them, so writing them to disk without end would let anyone fill it). Reading any of them in
order, files then stream, is log_reader.py.
"""

from __future__ import annotations

import calendar
import io
import re
import time
from collections.abc import Callable, Iterator
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
ZSTD_LEVEL = 3
ARCHIVED_FIELD, NEXT_FIELD = "#archived", "#next"
ENTRY_ID_RE = re.compile(r"([0-9]{1,20})-([0-9]{1,20})\Z")
SECONDS_RE = re.compile(r"[0-9]{1,12}(\.[0-9]{1,6})?\Z")

# A test's fault injection: called with the file's path once it is durable, before the script.
_after_write: Callable[[Path], None] | None = None


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
