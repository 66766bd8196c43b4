"""Actions that work through pages of a verb (release, move, requeue, redo) within a budget."""

from __future__ import annotations

import time

from tracker_api.admin.api_request import DIGITS_RE
from tracker_api.admin.pages.forms import Form
from tracker_core.admin import checks
from tracker_core.admin.errors import BadInput
from tracker_core.admin.paging import face_cursor

# A paged action (release, move, requeue, redo) from the page works through at most this many pages
# (MAX_PAGE each) or this many seconds, then offers to continue from where it stopped.
RELEASE_PAGES = 20
RELEASE_SECONDS = 2.0


def paged(verb, counted: str, cursor: int | str) -> tuple[int, int | str]:
    """Call VERB(cursor=..., limit=MAX_PAGE) page after page from CURSOR until the cursor is 0 or
    the budget is spent; (the pages' COUNTED fields summed, cursor to continue from, 0 at the
    end). Each page is one verb call, audited on its own."""
    total, deadline = 0, time.monotonic() + RELEASE_SECONDS
    for _ in range(RELEASE_PAGES):
        page = verb(cursor=cursor, limit=checks.MAX_PAGE)
        total += page[counted]
        cursor = page["cursor"]
        if cursor == 0 or time.monotonic() > deadline:
            break
    return total, cursor


def form_cursor(form: Form) -> int | str:
    """The form's cursor: digits, or SHARD:CURSOR (a sharded project's, admin.paging)."""
    return face_cursor(form.text("cursor", "0"))


def int_param(req, name: str, default: int, high: int) -> int:
    text = req.get_param(name) or ""
    if not text:
        return default
    if not DIGITS_RE.match(text) or not 0 <= int(text) <= high:
        raise BadInput(f"{name!r} must be an integer from 0 to {high}")
    return int(text)


def continued(message: str, cursor: int | str, action: str, fields: dict) -> tuple[str, dict]:
    """A paged action's answer: its message, and when it stopped at its budget, the query that
    makes the page offer to continue from CURSOR with the same FIELDS."""
    if not cursor:
        return message, {}
    return message + "; more left, continue below", {"continue": action, "cursor": cursor, **fields}
