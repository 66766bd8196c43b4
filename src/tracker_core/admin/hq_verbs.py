"""The warrior HQ: the global fields of its document and the registry of warriors."""

from __future__ import annotations

from tracker_core import keyspace
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.project import safe_html
from tracker_core.warriors import hq

HQ_MAX_CHARS = {
    "auto_project": 64,
    "broadcast_message": 5000,
    "seesaw_version": 40,
    "tracker_banner_html": 20000,
}
MAX_OFFSET = 10**9
MAX_WARRIORS_PAGE = 1000


def set_fields(ctx: AdminContext, values) -> dict:
    """Set the HQ document's global fields (auto_project, broadcast_message, seesaw_version:
    projects.json; tracker_banner_html: the front page)."""
    known = ", ".join(sorted(hq.HQ_FIELDS))
    if not isinstance(values, dict) or not values:
        raise BadInput(f"give one or more of {known}")
    for name, value in values.items():
        if name not in hq.HQ_FIELDS:
            raise BadInput(f"unknown HQ field {str(name)[:80]!r}: use {known}")
        if name == "tracker_banner_html":  # bounded as stored, once sanitised (safe_html)
            checks.text(value, name, 2 * HQ_MAX_CHARS[name], empty_ok=True)
            try:
                safe_html.bounded_clean(value, HQ_MAX_CHARS[name])
            except ValueError as exc:
                raise BadInput(f"{name!r} {exc}") from None
        else:
            checks.text(value, name, HQ_MAX_CHARS[name], empty_ok=True)
    stored = hq.set_fields(ctx.conn, values)  # BadInput for a bad auto_project
    ctx.audit("hq.set", None, fields=stored)
    return {"hq": stored}  # the banner as kept (tracker_core.project.safe_html)


def show_fields(ctx: AdminContext) -> dict:
    """The HQ document's global fields as stored, each with its default when unset (the front
    page's banner included, which projects.json does not carry)."""
    fields = dict(hq.HQ_FIELDS)
    fields.update(
        (name, value) for name, value in ctx.conn.hgetall(keyspace.HQ).items() if name in hq.HQ_FIELDS
    )
    return {"hq": fields}


def warriors(ctx: AdminContext, offset: int = 0, count: int = 100) -> dict:
    """Registered warriors by last heartbeat, newest first, and how many are online."""
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
        raise BadInput(f"'offset' must be an integer from 0 to {MAX_OFFSET}")
    if type(count) is not int or not 1 <= count <= MAX_WARRIORS_PAGE:
        raise BadInput(f"'count' must be an integer from 1 to {MAX_WARRIORS_PAGE}")
    return hq.registry(ctx.conn, offset, count)
