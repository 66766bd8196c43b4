"""Items and queues: add, count, sample, clear, move, redo, and where items are.

New items come in through tracker_core.items.intake (the Bloom filter, limits); items the project
had go back through tracker_core.items.giveback (limits at the settings age). Work on a queue goes a
page at a time (SSCAN, one script per page): a call returns a cursor to continue from, and the
``*_all`` verbs run every page and audit once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tracker_core import keyspace, scripts
from tracker_core.admin import checks, item_story, paging, shard_names
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput, Conflict, NotFound
from tracker_core.items import bloom_membership, giveback, intake, item_status
from tracker_core.offload.segment_file import shard_directory
from tracker_core.scripts.queues import RedoReply

# Redo (re-queue done or seen items on purpose): the queue it fills unless told otherwise
# (served after todo, backfeed and secondary), names per script call (one call blocks Redis
# while it runs), what the script counts per name in its order, and the reasons a name is left.
REDO_QUEUE = "redo"
REDO_BATCH = 1000
REDO_ATTEMPTS = 4
REDO_FIELDS = (
    "from_done",
    "from_seen",
    "held",
    "out",
    "queued",
    "dead",
    "offloaded",
    "not_seen",
    "maybe_offloaded",
)
REDO_SKIP_FIELDS = ("out", "queued", "dead", "offloaded", "not_seen", "maybe_offloaded", "not_utf8")
REDO_TOTALS = (*REDO_FIELDS, "not_utf8")  # what redo counts: the script's, and the names it never sees
REDO_AGAIN = (scripts.redo_items.codes.STALE_AGE, scripts.redo_items.codes.OWNERS_CHANGED)
PAGE_ALL = 5000  # SSCAN page of the *_all verbs
MAX_STORY_NAMES = 100  # names per story call: each may add a segment search to the shared pass


# -- new items -----------------------------------------------------------------------------------


def add(
    ctx: AdminContext,
    project: str,
    names: Iterable[str],
    queue: str = "todo",
    batch: int = intake.ADD_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Queue NAMES through the project's intake; see the contract in tracker_core.admin."""
    k = ctx.keys(project)
    checks.queue_and_owner(k, queue)
    if isinstance(names, list):
        checks.items([n for n in names if n])  # nothing is added when one is refused
        checked: Iterable[str] = names
    else:  # a stream (a file): checked as read, so a bad line stops it there
        checked = (checks.item(name, n) if name else name for n, name in enumerate(names, 1))
    added = duplicates = 0
    refused: dict = {}
    try:
        for new, seen in intake.add(ctx.conn, k, checked, queue, batch, refused, ctx.layout(project)):
            added, duplicates = added + new, duplicates + seen
            if progress is not None:
                progress(added, duplicates)
    except AdminError as exc:
        if not (added or duplicates):
            raise
        # Earlier batches went in: say so, and audit them.
        ctx.audit("items.add", project, queue=queue, added=added, duplicates=duplicates, stopped=str(exc))
        raise type(exc)(f"{exc} (stopped: {added} items added before it)") from None
    answer = {"added": added, "duplicates": duplicates}
    if refused:
        answer["refused_not_utf8"] = refused[intake.NOT_UTF8]
    ctx.audit("items.add", project, queue=queue, **answer)
    return answer


# -- looking at queues ---------------------------------------------------------------------------


def _queue_keys(ctx: AdminContext, project: str, queue: str) -> list[str]:
    """QUEUE's key on every shard of PROJECT, in shard order."""
    return [checks.queue_and_owner(k, queue)[0] for k in ctx.layout(project).keys]


def count(ctx: AdminContext, project: str, queue: str) -> dict:
    return {"queue": queue, "count": sum(ctx.conn.scard(key) for key in _queue_keys(ctx, project, queue))}


def sample(ctx: AdminContext, project: str, queue: str, count: int = 20) -> dict:
    keys = _queue_keys(ctx, project, queue)
    if type(count) is not int:
        raise BadInput(f"'count' must be an integer from 1 to {checks.MAX_SAMPLE}")
    count = max(1, min(count, checks.MAX_SAMPLE))
    if len(keys) == 1:
        return {"items": ctx.conn.srandmember(keys[0], count)}
    # Over shards: each draw picks a shard in proportion to the items it has left, so the sample
    # is as even over the whole queue as one SRANDMEMBER's over one set.
    left = [ctx.conn.scard(key) for key in keys]
    wanted = [0] * len(keys)
    for _ in range(min(count, sum(left))):
        at, index = random.randrange(sum(left)), 0
        while at >= left[index]:
            at, index = at - left[index], index + 1
        left[index] -= 1
        wanted[index] += 1
    picked = [name for key, n in zip(keys, wanted) if n for name in ctx.conn.srandmember(key, n)]
    random.shuffle(picked)
    return {"items": picked}


def status(ctx: AdminContext, project: str, names) -> list[dict]:
    """Where each of NAMES is (tracker_core.items.item_status, asked on the name's own shard:
    admin.shard_names), with its name."""
    layout = ctx.layout(project)
    checks.items(names)
    owners = item_status.Owners()
    places = []
    for name in names:
        place = shard_names.lookup(ctx.conn, layout, name, owners)[1]
        if place is None:
            raise NotFound(f"unknown project {project!r}")
        places.append({"item": name, **place})
    return places


def story(
    ctx: AdminContext, project: str, directory: Path, names, budget_s: float | None = None
) -> list[dict]:
    """Each of NAMES's whole story (tracker_core.admin.item_story: where it is, segment files searched,
    every done of it in the done log, IPs and earlier rounds), with its name; at most
    MAX_STORY_NAMES (the names of a shard share one pass over its segment files and done log).
    BUDGET_S: read for about that long at most, and say what was left."""
    layout = ctx.layout(project)
    checks.some_items(names, MAX_STORY_NAMES)
    deadline = None if budget_s is None else time.monotonic() + budget_s
    told = {}
    try:
        for index, part in shard_names.found_on(ctx.conn, layout, names).items():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # Shard I's done-log archive and segment files are under DIR/P.I (offload.shards).
            where = shard_directory(Path(directory), project, index)
            for answer in item_story.stories(ctx.conn, layout.keys[index], where, part, left):
                told[answer["item"]] = answer
    except item_story.UnknownProject:
        raise NotFound(f"unknown project {project!r}") from None
    return [told[name] for name in names]


# -- changing queues -----------------------------------------------------------------------------


def clear(ctx: AdminContext, project: str, queue: str) -> dict:
    shards = ctx.layout(project).keys
    keys = [checks.queue_and_owner(k, queue)[0] for k in shards]
    dropped = 0
    for k, key in zip(shards, keys):
        n = scripts.clear_queue(ctx.conn, k, queue=key)
        if n == scripts.clear_queue.codes.UNKNOWN_PROJECT:
            raise NotFound(f"unknown project {project!r}")
        dropped += n
    ctx.audit("queue.clear", project, queue=queue, dropped=dropped)
    return {"dropped": dropped}


def _move_page(ctx: AdminContext, project: str, source: str, target: str, pattern, cursor, limit) -> dict:
    layout = ctx.layout(project)
    first = layout.keys[0]
    if checks.queue_and_owner(first, source)[0] == checks.queue_and_owner(first, target)[0]:
        raise BadInput("source and target queue are the same")
    checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    paging.shard_cursor(layout, cursor)
    count = checks.page(limit)

    def page(k: keyspace.ProjectKeys, at: int) -> dict:
        source_key = checks.queue_and_owner(k, source)[0]
        target_key, owner = checks.queue_and_owner(k, target)
        next_cursor, names = ctx.conn.sscan(source_key, at, match=pattern, count=count)
        if not names:
            return {"moved": 0, "cursor": int(next_cursor)}

        def call(_age: str, held: list[str]) -> int:
            return scripts.move_items(
                ctx.conn, k, source=source_key, target=target_key, owner=owner, items=names, held=held
            )

        # Into a shared queue, items a limit matches are held, like added ones.
        moved = giveback.give_back(ctx.conn, k, names, call, owner=owner)
        if moved == scripts.move_items.codes.UNKNOWN_PROJECT:
            raise NotFound(f"unknown project {project!r}")
        if moved < 0:
            raise BadInput("move_items: bad arguments (nothing changed)")
        return {"moved": moved, "cursor": int(next_cursor)}

    return paging.shard_page(layout, cursor, page, lambda result: result["moved"])


def move(
    ctx: AdminContext,
    project: str,
    source: str,
    target: str,
    pattern: str = "*",
    cursor: int | str = 0,
    limit: int = 1000,
) -> dict:
    """Move the items of SOURCE matching PATTERN (a Redis glob) to TARGET, one SSCAN page (of
    one shard: a sharded project's cursor is "SHARD:CURSOR", admin.paging)."""
    result = _move_page(ctx, project, source, target, pattern, cursor, limit)
    ctx.audit("queue.move", project, source=source, target=target, pattern=pattern, moved=result["moved"])
    return result


def move_all(ctx: AdminContext, project: str, source: str, target: str, pattern: str = "*") -> dict:
    """Move every item of SOURCE matching PATTERN to TARGET, page by page; audited once."""
    moved = paging.every_page(
        ctx,
        "queue.move",
        project,
        {"source": source, "target": target, "pattern": pattern},
        lambda cursor: _move_page(ctx, project, source, target, pattern, cursor, PAGE_ALL),
        "moved",
    )
    return {"moved": moved}


# -- redo: re-queue done or seen items on purpose (the one way past the Bloom filter) ------------


def seen_by_filter(conn, k: keyspace.ProjectKeys, names: list[str]) -> list[bool]:
    """Whether the project's Bloom filter has (probably) seen each name; reads only, for every
    filter kind (bloom_membership.seen_by). A project whose filter was never configured has seen nothing."""
    return bloom_membership.seen_by(conn, k, [scripts.wire(n) for n in names])


def _redo_batch(
    ctx: AdminContext, k, target: str, owner: str, names: list[str], seen: dict, anyway: bool
) -> RedoReply:
    """One redo_items script call through the give-back path (retried when the limits or the
    downloader queues moved; the last attempt does not check the age)."""

    def call(age: str, held: list[str]) -> RedoReply:
        return scripts.redo_items(
            ctx.conn,
            k,
            age=age,
            target=target,
            owner=owner,
            even_if_offloaded=anyway,
            owners=sorted(ctx.conn.smembers(k.downloader_queues)),
            items=names,
            held=held,
            seen=[bool(seen.get(name)) for name in names],
        )

    reply = giveback.give_back(
        ctx.conn,
        k,
        names,
        call,
        owner=owner,
        attempts=REDO_ATTEMPTS,
        again=lambda reply: reply.code in REDO_AGAIN,
        held_filed=lambda reply, held: reply.code == scripts.redo_items.codes.OK and reply.held > 0,
    )
    if reply.code == scripts.redo_items.codes.UNKNOWN_PROJECT:
        raise NotFound(f"unknown project {k.project!r}")
    if reply.code == scripts.redo_items.codes.NOT_TRIPLES:
        raise BadInput("redo_items: bad arguments (nothing changed)")
    if reply.code != scripts.redo_items.codes.OK:
        raise Conflict("the project's limits or downloader queues kept changing; try again")
    return reply


def redo_names(
    ctx: AdminContext, project: str, names: list[str], queue: str, even_if_offloaded: bool
) -> dict:
    """Re-queue NAMES: done items, and items the filter has seen that are nowhere (redo_items-n.lua
    says what happens to each), each on its own shard. Names that are not UTF-8 stay where they
    are (not_utf8): a warrior could claim one but never report it. Not audited: the verbs audit."""
    layout = ctx.layout(project)
    checks.queue_and_owner(layout.keys[0], queue)
    totals = dict.fromkeys(REDO_TOTALS, 0)
    for index, part in shard_names.redo_shards(ctx.conn, layout, names).items():
        _redo_on(ctx, layout.keys[index], part, queue, even_if_offloaded, totals)
    return _redo_result(totals)


def _redo_on(
    ctx: AdminContext, k: keyspace.ProjectKeys, names: list[str], queue: str, anyway: bool, totals: dict
) -> None:
    """redo_names on one shard (keys K), NAMES all of it; the counts added to TOTALS."""
    target, owner = checks.queue_and_owner(k, queue)
    good = [n for n in names if intake.valid_utf8(n)]
    totals["not_utf8"] += len(names) - len(good)
    for start in range(0, len(good), REDO_BATCH):
        part = good[start : start + REDO_BATCH]
        in_done = ctx.conn.smismember(k.done, [scripts.wire(n) for n in part])
        maybe = [n for n, done in zip(part, in_done) if not done]
        # A done name came in through the filter; ask it only about the others. (Should a done
        # name leave `done` for a segment before the script runs, it is then a seen name found
        # nowhere: skipped as maybe_offloaded, never queued twice.)
        seen = dict.fromkeys(part, True)
        seen.update(zip(maybe, seen_by_filter(ctx.conn, k, maybe)))
        reply = _redo_batch(ctx, k, target, owner, part, seen, anyway)
        for field, value in reply.counts().items():
            totals[field] += value


def _redo_result(totals: dict) -> dict:
    skipped = {f: totals[f] for f in REDO_SKIP_FIELDS}
    return {
        "requeued": totals["from_done"] + totals["from_seen"],
        "from_done": totals["from_done"],
        "from_seen": totals["from_seen"],
        "held": totals["held"],
        "skipped": sum(skipped.values()),
        "skipped_by_reason": skipped,
    }


def _redo_page(ctx, project, names, pattern, cursor, limit, queue, even_if_offloaded) -> dict:
    if (names is None) == (pattern is None):
        raise BadInput("give 'items' (a list of names) or 'pattern' (a glob over done items)")
    checks.queue(queue)
    checks.flag(even_if_offloaded, "even_if_offloaded")
    if names is not None:
        checks.some_items(names)
        return redo_names(ctx, project, names, queue, even_if_offloaded)
    checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    layout = ctx.layout(project)
    checks.queue_and_owner(layout.keys[0], queue)
    paging.shard_cursor(layout, cursor)
    count = checks.page(limit)

    def page(k: keyspace.ProjectKeys, at: int) -> dict:
        next_cursor, found = ctx.conn.sscan(k.done, at, match=pattern, count=count)
        # A done name past the length limit (stored before the limit) could be claimed but not
        # reported: it stays done, counted apart.
        fit = [n for n in found if len(n) <= checks.MAX_ITEM_CHARS]
        totals = dict.fromkeys(REDO_TOTALS, 0)
        _redo_on(ctx, k, fit, queue, even_if_offloaded, totals)
        result = _redo_result(totals)
        result["skipped_by_reason"]["too_long"] = len(found) - len(fit)
        result["skipped"] += len(found) - len(fit)
        result["cursor"] = int(next_cursor)
        return result

    return paging.shard_page(layout, cursor, page, lambda result: result["requeued"] or result["skipped"])


def _redo_detail(queue: str, names, pattern, result: dict) -> dict:
    chosen = {"pattern": pattern} if pattern is not None else {"items": len(names)}
    return {"queue": queue, **chosen, **{f: v for f, v in result.items() if f != "cursor"}}


def redo(
    ctx: AdminContext,
    project: str,
    names=None,
    pattern=None,
    cursor: int | str = 0,
    limit: int = 1000,
    queue: str = REDO_QUEUE,
    even_if_offloaded: bool = False,
) -> dict:
    """Re-queue the items NAMES (1 to MAX_PAGE), or one SSCAN page of done items matching
    PATTERN (of one shard; continue from the returned cursor until it is 0), into QUEUE: done items leave
    `done` (items_done drops with them), items seen by the filter but found nowhere are queued
    bypassing it, items out or queued stay where they are (skipped), limited ones are held."""
    result = _redo_page(ctx, project, names, pattern, cursor, limit, queue, even_if_offloaded)
    ctx.audit("items.redo", project, **_redo_detail(queue, names, pattern, result))
    return result


def _add_redo(total: dict, page: dict) -> None:
    for field in ("requeued", "from_done", "from_seen", "held", "skipped"):
        total[field] = total.get(field, 0) + page[field]
    reasons = total.setdefault("skipped_by_reason", {})
    for reason, n in page["skipped_by_reason"].items():
        reasons[reason] = reasons.get(reason, 0) + n


def redo_all(
    ctx: AdminContext,
    project: str,
    names=None,
    pattern=None,
    queue: str = REDO_QUEUE,
    even_if_offloaded: bool = False,
) -> dict:
    """redo over any number of NAMES (MAX_PAGE at a time), or every page of done items matching
    PATTERN; audited once ("stopped" when it failed after some were re-queued)."""
    if (names is None) == (pattern is None):
        raise BadInput("give 'items' (a list of names) or 'pattern' (a glob over done items)")
    if names is not None:
        checks.items(names)
    total: dict = {}
    try:
        if pattern is not None:
            cursor = 0
            while True:
                page = _redo_page(ctx, project, None, pattern, cursor, PAGE_ALL, queue, even_if_offloaded)
                _add_redo(total, page)
                cursor = page["cursor"]
                if cursor == 0:
                    break
        else:
            for start in range(0, len(names), checks.MAX_PAGE):
                part = names[start : start + checks.MAX_PAGE]
                _add_redo(total, _redo_page(ctx, project, part, None, 0, 0, queue, even_if_offloaded))
    except AdminError as exc:
        if total.get("requeued"):
            ctx.audit("items.redo", project, **_redo_detail(queue, names, pattern, total), stopped=str(exc))
        raise
    ctx.audit("items.redo", project, **_redo_detail(queue, names, pattern, total))
    return total
