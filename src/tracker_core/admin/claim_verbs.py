"""Claims: list them a page at a time, and give them back (release) through the give-back path."""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.admin import checks, paging
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.infra import redis_clock
from tracker_core.items import claim_records, giveback

PAGE_ALL = 5000  # page of release_all


def _claim_row(name: str, claim: str | None, claimed_ms: int | None) -> dict:
    record = claim_records.parse(claim)
    return {
        "item": name,
        "downloader": record.downloader,
        "ip": record.ip,
        "times_claimed": record.times_claimed or 0,
        "claimed_at_ms": claimed_ms,
    }


def list_claims(
    ctx: AdminContext, project: str, cursor: int | str = 0, count: int = 100, pattern: str = "*"
) -> dict:
    """One HSCAN page of claims (of one shard: a sharded project's cursor is "SHARD:CURSOR",
    admin.paging) with their holder, IP and claim time."""
    layout = ctx.layout(project)
    checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    paging.shard_cursor(layout, cursor)
    size = checks.page(count)

    def page(k: keyspace.ProjectKeys, at: int) -> dict:
        next_cursor, found = ctx.conn.hscan(k.claims, at, match=pattern, count=size)
        times = claim_records.claim_times(ctx.conn, k.out, found)
        return {"claims": [_claim_row(n, found[n], times[n]) for n in found], "cursor": int(next_cursor)}

    return paging.shard_page(layout, cursor, page, lambda result: result["claims"])


def release_names(ctx: AdminContext, k: keyspace.ProjectKeys, holder: str, names: list[str]) -> int:
    """Give back the claims of NAMES held by HOLDER ('' = anyone): to todo, or held when a limit
    matches them (tracker_core.items.giveback); how many were released."""
    if not names:
        return 0

    reply = giveback.release(ctx.conn, k, holder, names, now_ms=redis_clock.now_ms(ctx.conn))
    if reply.code == scripts.release.codes.UNKNOWN_PROJECT:
        raise NotFound(f"unknown project {k.project!r}")
    return reply.released


def _release_older(
    ctx: AdminContext, k: keyspace.ProjectKeys, cutoff_ms: int, cursor: int, limit: int
) -> dict:
    """One page of release by age: LIMIT claims of `out` from the cursor's rank (ordered by when
    they may be reclaimed, not by age, as a claim's TTL grows with its reclaims), those claimed
    at CUTOFF_MS or before released. The cursor is 1 + the rank of the next page (released claims
    left `out`, so the claims kept shift down to it), 0 after a short page."""
    offset = max(cursor - 1, 0)
    names = ctx.conn.zrange(k.out, offset, offset + limit - 1)
    records = dict(zip(names, ctx.conn.hmget(k.claims, names))) if names else {}
    times = claim_records.claim_times(ctx.conn, k.out, records)
    released = release_names(ctx, k, "", [n for n, ms in times.items() if ms is not None and ms <= cutoff_ms])
    return {"released": released, "cursor": offset + len(names) - released + 1 if len(names) == limit else 0}


def _release_page(ctx, project, downloader, older_than_s, pattern, cursor, limit) -> dict:
    layout = ctx.layout(project)
    limit = checks.page(limit)
    paging.shard_cursor(layout, cursor)
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
        cutoff_ms = redis_clock.now_ms(ctx.conn) - int(older_than_s * 1000)

        def page(k: keyspace.ProjectKeys, at: int) -> dict:
            return _release_older(ctx, k, cutoff_ms, at, limit)

    elif downloader is not None:

        def page(k: keyspace.ProjectKeys, at: int) -> dict:
            next_cursor, found = ctx.conn.hscan(k.claims, at, count=limit)
            names = [n for n, claim in found.items() if claim.split("\t", 1)[0] == downloader]
            return {"released": release_names(ctx, k, downloader, names), "cursor": int(next_cursor)}

    else:

        def page(k: keyspace.ProjectKeys, at: int) -> dict:
            next_cursor, found = ctx.conn.hscan(k.claims, at, match=pattern, count=limit)
            return {"released": release_names(ctx, k, "", list(found)), "cursor": int(next_cursor)}

    return paging.shard_page(layout, cursor, page, lambda result: result["released"])


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
    cursor: int | str = 0,
    limit: int = 1000,
) -> dict:
    """Give claims back, one page (of one shard: a sharded project's cursor is "SHARD:CURSOR",
    admin.paging): by holder, by age or by name pattern (exactly one).

    By age reads ``out`` a page at a time and gives back the claims whose record (or, for a record
    from before claim times were kept, ``out``) says they are older; the cursor is 0 after the
    last page. The others scan ``claims``.
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
