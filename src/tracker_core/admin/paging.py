"""Paged verbs: run one to the end and audit it once (the ``*_all`` verbs: move, release,
requeue, redo), and page over a sharded project's shards one after another.

Work on a queue goes a page at a time (one script per page, so Redis stays responsive); a face
that wants all of it calls the ``*_all`` verb, which records one audit entry with the total,
or, when a page is refused after earlier pages changed something, the total so far and why it
stopped before the refusal goes on to the caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.shard_layout import ShardLayout


def every_page(
    ctx: AdminContext,
    action: str,
    project: str,
    detail: dict,
    page: Callable[[int], dict],
    counted: str,
) -> int:
    """PAGE(cursor) -> {COUNTED: n, "cursor": next} until the cursor is 0; the total of COUNTED."""
    total = cursor = 0
    try:
        while True:
            result = page(cursor)
            total, cursor = total + result[counted], result["cursor"]
            if cursor == 0:
                break
    except AdminError as exc:
        if total:
            ctx.audit(action, project, **detail, **{counted: total}, stopped=str(exc))
        raise
    ctx.audit(action, project, **detail, **{counted: total})
    return total


# -- pages over a sharded project's shards (docs/sharding.md) ------------------------------------
#
# A paged verb scans one shard's key at a time, shard after shard. A one-shard project's cursor
# is the shard's own cursor, an int, as it always was; a sharded project's is "SHARD:CURSOR"
# (shard index, that shard's cursor), and 0 once the last shard is done.

SHARD_CURSOR_RE = re.compile(r"([0-9]{1,2}):([0-9]{1,20})\Z")
DIGITS_RE = re.compile(r"[0-9]{1,20}\Z")
CURSOR_HELP = (
    f"an integer from 0 to {checks.MAX_CURSOR}, or SHARD:CURSOR as a page of a sharded project returned"
)


def face_cursor(text) -> int | str:
    """A cursor a face reads as text (a query parameter, a form field, a CLI option): digits are an
    int (a one-shard project's cursor, as before), SHARD:CURSOR stays text; BadInput otherwise."""
    text = "0" if text is None or text == "" else text
    if type(text) is str and DIGITS_RE.match(text):  # ASCII digits only: int() also takes "²"
        return checks.cursor(int(text))
    if type(text) is str and SHARD_CURSOR_RE.match(text):
        return text
    raise BadInput(f"'cursor' must be {CURSOR_HELP}")


def shard_cursor(layout: ShardLayout, cursor) -> tuple[int, int]:
    """(shard index, that shard's own cursor) of a verb's CURSOR over LAYOUT's shards: an int is
    the first shard's, "I:C" shard I's; BadInput for anything else or a shard it does not have."""
    if type(cursor) is int:
        return 0, checks.cursor(cursor)
    found = SHARD_CURSOR_RE.match(cursor) if type(cursor) is str else None
    if found is None or int(found[1]) >= layout.count or int(found[2]) > checks.MAX_CURSOR:
        raise BadInput(f"'cursor' must be {CURSOR_HELP}")
    return int(found[1]), int(found[2])


def onward(layout: ShardLayout, index: int, cursor: int) -> int | str:
    """The project's cursor after shard INDEX's page returned its own CURSOR."""
    if not layout.sharded:
        return cursor
    if cursor:
        return f"{index}:{cursor}"
    return f"{index + 1}:0" if index + 1 < layout.count else 0


def shard_page(
    layout: ShardLayout,
    cursor,
    page: Callable[[ProjectKeys, int], dict],
    found: Callable[[dict], object],
) -> dict:
    """One page of a paged verb over LAYOUT's shards from the project's CURSOR: PAGE(shard's
    keys, shard's cursor) -> {..., "cursor": the shard's next}, its cursor made the project's
    (onward). A shard whose scan ended without FOUND(result) hands on to the next in the same
    call, so that an empty shard costs no empty page."""
    index, at = shard_cursor(layout, cursor)
    while True:
        result = page(layout.keys[index], at)
        ended = result["cursor"] == 0
        result["cursor"] = onward(layout, index, result["cursor"])
        if not ended or found(result) or index + 1 >= layout.count:
            return result
        index, at = index + 1, 0
