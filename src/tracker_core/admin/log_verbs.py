"""The logs an admin reads: the audit log (every change, by whom) and the done log (every
completion; archived to segment files by `tracker maintain`, tracker_core.donelog.log_archive)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from tracker_core.access import audit
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.donelog import log_archive, log_reader, log_shards

MAX_CURSOR_CHARS = 41
MAX_DOWNLOADER_CHARS = 64


def audit_page(
    ctx: AdminContext, project: str | None = None, count: int = 100, before: str | None = None
) -> dict:
    """A page of the audit log (PROJECT's, or the global one), newest first; pass the returned
    "next" as BEFORE for the next page. A deleted project's log stays readable."""
    if project is not None:
        ctx.keys(project, must_exist=False)  # a name check
    if type(count) is not int:
        raise BadInput(f"'count' must be an integer from 1 to {audit.MAX_PAGE}")
    try:
        return audit.read(ctx.conn, project, count, before)
    except ValueError as exc:
        raise BadInput(str(exc)) from None


@contextlib.contextmanager
def _log_input():
    """A LogError raised within (a bad time, cursor or kind, a segment file that cannot be
    read) as the BadInput the faces refuse with."""
    try:
        yield
    except log_archive.LogError as exc:
        raise BadInput(str(exc)) from None


def _since_ms(since) -> int | None:
    if since is None:
        return None
    with _log_input():
        return log_archive.parse_since(since)


def done_page(
    ctx: AdminContext,
    project: str,
    directory: Path,
    kind: str = "done",
    since=None,
    downloader: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
    item: str | None = None,
) -> dict:
    """A page of the done log (segments, then the stream), or of the uploads or bad_dones
    streams, oldest first, filtered by time, downloader and the ITEM an entry names; "cursor"
    in the answer continues it (None: the end). A sharded project's shards are merged in time
    order (tracker_core.donelog.log_shards)."""
    layout = ctx.layout(project)
    if downloader is not None:
        checks.text(downloader, "downloader", MAX_DOWNLOADER_CHARS)
    if item is not None:
        checks.item(item, 1)
    if type(limit) is not int or not 1 <= limit <= log_reader.PAGE_MAX:
        raise BadInput(f"'limit' must be an integer from 1 to {log_reader.PAGE_MAX}")
    with _log_input():
        if cursor is not None:
            log_archive.parse_id(cursor)
        since_ms = _since_ms(since)
        if layout.sharded:
            return log_shards.page(
                ctx.conn, layout, Path(directory), kind, since_ms, downloader, cursor, limit=limit, item=item
            )
        return log_reader.page(
            ctx.conn, layout.keys[0], Path(directory), kind, since_ms, downloader, cursor, limit, item=item
        )


def export(
    ctx: AdminContext,
    project: str,
    directory: Path,
    out,
    kind: str = "done",
    since=None,
    downloader: str | None = None,
    item: str | None = None,
) -> None:
    """Write the log to the binary stream OUT as JSON lines, oldest first (the entries that
    name ITEM, when given); a sharded project's shards merged in time order."""
    layout = ctx.layout(project)
    if item is not None:
        checks.item(item, 1)
    with _log_input():
        if layout.sharded:
            log_shards.export(
                ctx.conn, layout, Path(directory), out, kind, _since_ms(since), downloader, item
            )
            return
        log_reader.export(
            ctx.conn, layout.keys[0], Path(directory), out, kind, _since_ms(since), downloader, item
        )


def status(ctx: AdminContext, project: str) -> dict:
    """What PROJECT's done log holds: segments, entries on disk and in Redis, entries dropped
    (a sharded project's shards added up, each one's under "shards")."""
    layout = ctx.layout(project)
    if layout.sharded:
        return log_shards.status(ctx.conn, layout)
    return log_archive.status(ctx.conn, layout.keys[0])
