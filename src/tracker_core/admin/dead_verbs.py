"""Dead items (reclaimed more than max_reclaims times): list them, put them back.

Back into a shared queue an item a limit matches is held, as for every give-back
(tracker_core.items.giveback); a downloader's own queue takes them all. An item dead on a shard goes
back into the queue on that shard (where its name hashes to).
"""

from __future__ import annotations

import json

from tracker_core import keyspace, scripts
from tracker_core.admin import checks, paging, shard_names
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.items import giveback

REQUEUE_BATCH = 5000  # names per script call
PAGE_ALL = 1000  # HSCAN page of requeue_all


def _dead_row(name: str, history: str) -> dict:
    try:
        record = json.loads(history)
    except ValueError:
        record = None
    return {"item": name, **(record if isinstance(record, dict) else {"history": history})}


def list_dead(ctx: AdminContext, project: str, cursor: int | str = 0, count: int = 100) -> dict:
    """One HSCAN page of dead items (of one shard: a sharded project's cursor is "SHARD:CURSOR",
    admin.paging) with their history."""
    layout = ctx.layout(project)
    paging.shard_cursor(layout, cursor)
    size = checks.page(count)

    def page(k: keyspace.ProjectKeys, at: int) -> dict:
        next_cursor, found = ctx.conn.hscan(k.dead, at, count=size)
        return {"dead": [_dead_row(n, h) for n, h in found.items()], "cursor": int(next_cursor)}

    return paging.shard_page(layout, cursor, page, lambda result: result["dead"])


def requeue_names(ctx: AdminContext, k: keyspace.ProjectKeys, names: list[str], queue: str) -> int:
    """Put the dead items NAMES back into QUEUE with a fresh claim count; how many were dead."""
    target, owner = checks.queue_and_owner(k, queue)
    moved = 0
    for start in range(0, len(names), REQUEUE_BATCH):
        part = names[start : start + REQUEUE_BATCH]

        def call(_age: str, held: list[str], part=part) -> int:
            return scripts.requeue_dead(ctx.conn, k, target=target, owner=owner, items=part, held=held)

        n = giveback.give_back(ctx.conn, k, part, call, owner=owner)
        if n < 0:
            raise BadInput("requeue_dead: bad arguments (nothing changed)")
        moved += n
    return moved


def requeue(ctx: AdminContext, project: str, names, queue: str = "todo") -> dict:
    """Put the dead items NAMES (1 to MAX_PAGE) back into QUEUE, each on its own shard."""
    checks.some_items(names)
    layout = ctx.layout(project)
    checks.queue_and_owner(layout.keys[0], queue)
    dead_on = shard_names.holding(ctx.conn, layout, names, lambda k, name: ("HEXISTS", k.dead, name))
    moved = sum(requeue_names(ctx, layout.keys[i], part, queue) for i, part in dead_on.items())
    ctx.audit("dead.requeue", project, queue=queue, items=len(names), requeued=moved)
    return {"requeued": moved}


def _requeue_page(ctx: AdminContext, project: str, cursor, limit, queue) -> dict:
    layout = ctx.layout(project)
    checks.queue_and_owner(layout.keys[0], queue)
    paging.shard_cursor(layout, cursor)
    size = checks.page(limit)

    def page(k: keyspace.ProjectKeys, at: int) -> dict:
        next_cursor, found = ctx.conn.hscan(k.dead, at, count=size)
        moved = requeue_names(ctx, k, list(found), queue) if found else 0
        return {"requeued": moved, "cursor": int(next_cursor)}

    return paging.shard_page(layout, cursor, page, lambda result: result["requeued"])


def requeue_page(
    ctx: AdminContext, project: str, cursor: int | str = 0, limit: int = 1000, queue: str = "todo"
) -> dict:
    """Requeue one HSCAN page of dead items (of one shard, each back into the queue on its own
    shard); continue from the returned cursor until it is 0."""
    result = _requeue_page(ctx, project, cursor, limit, queue)
    ctx.audit("dead.requeue", project, queue=queue, all=True, requeued=result["requeued"])
    return result


def requeue_all(ctx: AdminContext, project: str, queue: str = "todo") -> dict:
    """Requeue every dead item, a page at a time; audited once."""
    moved = paging.every_page(
        ctx,
        "dead.requeue",
        project,
        {"queue": queue, "all": True},
        lambda cursor: _requeue_page(ctx, project, cursor, PAGE_ALL, queue),
        "requeued",
    )
    return {"requeued": moved}
