"""Run a paged verb to the end and audit it once: the ``*_all`` verbs (move, release, requeue).

Work on a queue goes a page at a time (one script per page, so Redis stays responsive); a face
that wants all of it calls the ``*_all`` verb, which records one audit entry with the total,
or, when a page is refused after earlier pages changed something, the total so far and why it
stopped before the refusal goes on to the caller.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError


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
