"""Claims: list them a page at a time, and give them back (release) through the give-back path."""

from __future__ import annotations

import time

from tracker_core import giveback
from tracker_core import keys as keyspace
from tracker_core.admin import checks, paging
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.reply_codes import Release

PAGE_ALL = 5000  # page of release_all


def _claim_row(name: str, claim: str | None, claimed_ms) -> dict:
    downloader, ip, times = ((claim or "").split("\t") + ["", "", "0"])[:3]
    return {
        "item": name,
        "downloader": downloader,
        "ip": ip,
        "times_claimed": int(times or 0),
        "claimed_at_ms": int(float(claimed_ms)) if claimed_ms is not None else None,
    }


def list_claims(
    ctx: AdminContext, project: str, cursor: int = 0, count: int = 100, pattern: str = "*"
) -> dict:
    """One HSCAN page of claims with their holder, IP and claim time."""
    k = ctx.keys(project)
    checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    checks.cursor(cursor)
    next_cursor, page = ctx.conn.hscan(k.claims, cursor, match=pattern, count=checks.page(count))
    names = list(page)
    times = ctx.conn.zmscore(k.out, names) if names else []
    return {"claims": [_claim_row(n, page[n], t) for n, t in zip(names, times)], "cursor": int(next_cursor)}


def release_names(ctx: AdminContext, k: keyspace.ProjectKeys, holder: str, names: list[str]) -> int:
    """Give back the claims of NAMES held by HOLDER ('' = anyone): to todo, or held when a limit
    matches them (tracker_core.giveback); how many were released."""
    if not names:
        return 0

    reply = giveback.release(ctx.conn, k, holder, names, now_ms=int(time.time() * 1000))
    if reply.code == Release.UNKNOWN_PROJECT:
        raise NotFound(f"unknown project {k.project!r}")
    return reply.released


def _release_page(ctx, project, downloader, older_than_s, pattern, cursor, limit) -> dict:
    k = ctx.keys(project)
    limit = checks.page(limit)
    checks.cursor(cursor)
    if sum(x is not None for x in (downloader, older_than_s, pattern)) != 1:
        raise BadInput("give exactly one of downloader, older_than_s, pattern")
    if downloader is not None:
        checks.text(downloader, "downloader", checks.MAX_DOWNLOADER_CHARS)
    if pattern is not None:
        checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    if older_than_s is not None:
        # NaN fails the comparison; bool is not a number of seconds.
        if type(older_than_s) not in (int, float) or not 0 <= older_than_s <= checks.MAX_AGE_S:
            raise BadInput(f"'older_than_s' must be a number of seconds from 0 to {checks.MAX_AGE_S}")
        cutoff = int(time.time() * 1000 - older_than_s * 1000)
        names = ctx.conn.zrangebyscore(k.out, "-inf", cutoff, start=0, num=limit)
        released = release_names(ctx, k, "", names)
        # Released claims leave `out`, so the next page starts at the oldest left; a full page
        # that released nothing would be read again forever: then there is nothing more to do.
        return {"released": released, "cursor": 1 if len(names) == limit and released else 0}
    if downloader is not None:
        next_cursor, page = ctx.conn.hscan(k.claims, cursor, count=limit)
        names = [n for n, claim in page.items() if claim.split("\t", 1)[0] == downloader]
        return {"released": release_names(ctx, k, downloader, names), "cursor": int(next_cursor)}
    next_cursor, page = ctx.conn.hscan(k.claims, cursor, match=pattern, count=limit)
    return {"released": release_names(ctx, k, "", list(page)), "cursor": int(next_cursor)}


def _filter(downloader, older_than_s, pattern) -> dict:
    return {
        name: value
        for name, value in (("downloader", downloader), ("older_than_s", older_than_s), ("pattern", pattern))
        if value is not None
    }


def release(
    ctx: AdminContext,
    project: str,
    downloader: str | None = None,
    older_than_s: float | None = None,
    pattern: str | None = None,
    cursor: int = 0,
    limit: int = 1000,
) -> dict:
    """Give claims back, one page: by holder, by age or by name pattern (exactly one).

    By age reads the oldest claims from ``out`` (ordered by claim time), so each call starts
    again at the oldest and the cursor is 0 when none is left. The others scan ``claims``.
    """
    result = _release_page(ctx, project, downloader, older_than_s, pattern, cursor, limit)
    ctx.audit(
        "claims.release",
        project,
        filter=_filter(downloader, older_than_s, pattern),
        released=result["released"],
    )
    return result


def release_all(
    ctx: AdminContext,
    project: str,
    downloader: str | None = None,
    older_than_s: float | None = None,
    pattern: str | None = None,
) -> dict:
    """release, every page until none is left; audited once."""
    released = paging.every_page(
        ctx,
        "claims.release",
        project,
        {"filter": _filter(downloader, older_than_s, pattern)},
        lambda cursor: _release_page(ctx, project, downloader, older_than_s, pattern, cursor, PAGE_ALL),
        "released",
    )
    return {"released": released}
