"""Admin operations on queues and claims that work a page at a time (millions of claims).

Nothing here loads a whole structure: queues are read with SSCAN and SRANDMEMBER, claims with
HSCAN or a range of the ``out`` index by claim time, and every change goes through one script
per page. Each call returns a cursor; the caller (API, CLI) continues from it.
"""

from __future__ import annotations

import json
import re
import time

from tracker_core import backfeed_secrets, bloom, hq, offload, protocol, scripts
from tracker_core import keys as keyspace
from tracker_core import limits as limits_mod
from tracker_core import stats as stats_mod
from tracker_core.admin import REDO_QUEUE, Admin, AdminError

MAX_PAGE = 10_000
MAX_SAMPLE = 1000
DELETE_CHUNK = 500
MAX_CURSOR = 2**64 - 1  # Redis SCAN cursors are unsigned 64-bit numbers
MAX_PATTERN_CHARS = 1000  # Redis globs (move, claims) and limit patterns
MAX_ITEM_CHARS = protocol.MAX_ITEM_CHARS  # what /done accepts back
MAX_DOWNLOADER_CHARS = 100
MAX_AGE_S = 10 * 365 * 86400  # release by age: ten years covers any claim
SHARD_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")  # the backfeed's ?shard= (tracker_api.backfeed)
HQ_MAX_CHARS = {
    "auto_project": 64,
    "broadcast_message": 5000,
    "seesaw_version": 40,
    "tracker_banner_html": 20000,
}


class NotFound(AdminError):
    """The thing named (a secret, a token, a limit) does not exist: the API answers 404."""


# -- input checks shared by the API, the admin pages and the CLI --------------------------------
# Each raises AdminError with a one-line reason before anything is changed.


def check_text(value, name: str, max_chars: int, empty_ok: bool = False) -> str:
    if type(value) is not str:
        raise AdminError(f"{name!r} must be a string")
    if not value and not empty_ok:
        raise AdminError(f"{name!r} must not be empty")
    if len(value) > max_chars:
        raise AdminError(f"{name!r} must be at most {max_chars} characters")
    return value


def check_cursor(value, name: str = "cursor") -> int:
    if type(value) is not int or not 0 <= value <= MAX_CURSOR:
        raise AdminError(f"{name!r} must be an integer from 0 to {MAX_CURSOR}")
    return value


def check_items(names) -> list[str]:
    """Item names as a queue takes them: strings of 1 to MAX_ITEM_CHARS without NUL.

    NUL joins the names of a multi claim and separates them in segment files, and a longer
    name could be claimed but never reported done.
    """
    if type(names) is not list:
        raise AdminError("'items' must be a list of strings")
    for n, name in enumerate(names):
        if type(name) is not str or not 0 < len(name) <= MAX_ITEM_CHARS or "\0" in name:
            raise AdminError(
                f"item {n + 1}: must be a string of 1 to {MAX_ITEM_CHARS} characters without NUL"
            )
    return names


def check_queue(queue) -> str:
    """A queue name as the CLI and API take it; downloader:NAME needs a valid downloader name."""
    if type(queue) is not str:
        raise AdminError("queue must be a string")
    try:
        keyspace.ProjectKeys("any").queue(queue[:200])  # the one rule of what names a queue
    except ValueError as exc:
        raise AdminError(f"{exc}: use todo, backfeed, secondary, redo or downloader:NAME") from None
    return queue


def _queue_key(k: keyspace.ProjectKeys, queue: str) -> str:
    return k.queue(check_queue(queue))


def _page(count) -> int:
    if type(count) is not int:
        raise AdminError(f"page size must be an integer from 1 to {MAX_PAGE}")
    return max(1, min(count, MAX_PAGE))


def sample(admin: Admin, project: str, queue: str, count: int = 20) -> list[str]:
    k = admin._keys(project)
    return admin.r.srandmember(_queue_key(k, queue), max(1, min(count, MAX_SAMPLE)))


def count(admin: Admin, project: str, queue: str) -> int:
    k = admin._keys(project)
    return admin.r.scard(_queue_key(k, queue))


def clear(admin: Admin, project: str, queue: str) -> int:
    k = admin._keys(project)
    return scripts.run(admin.r, "clear_queue", (k.settings, _queue_key(k, queue)), ())


def move(
    admin: Admin,
    project: str,
    source: str,
    target: str,
    pattern: str = "*",
    cursor: int = 0,
    limit: int = 1000,
) -> dict:
    """Move items matching PATTERN (a Redis glob) from SOURCE to TARGET, one SSCAN page.

    Into a shared queue (todo, backfeed, secondary, redo), items a limit matches are held in
    its sub-queue instead, like added ones; a downloader's own queue takes them all.
    """
    k = admin._keys(project)
    source_key, target_key = _queue_key(k, source), _queue_key(k, target)
    if source_key == target_key:
        raise AdminError("source and target queue are the same")
    pattern = check_text(pattern, "pattern", MAX_PATTERN_CHARS)
    check_cursor(cursor)
    owner = k.queue_and_owner(target)[1]
    next_cursor, names = admin.r.sscan(source_key, cursor, match=pattern, count=_page(limit))
    moved = 0
    if names:
        compiled = None if owner else limits_mod.CompiledLimits(limits_mod.load(admin.r, k))
        held = limits_mod.held_entries(compiled, names)
        moved = scripts.run(
            admin.r,
            "move_items",
            (k.settings, source_key, target_key, k.downloader_queues, k.limited_in),
            (owner, *[limits_mod.wire(x) for pair in zip(names, held) for x in pair]),
        )
        if moved > 0 and any(held):
            limits_mod.hold_new(admin.r, k)
    return {"moved": moved, "cursor": int(next_cursor)}


def _claim_row(name: str, claim: str | None, claimed_ms) -> dict:
    downloader, ip, times = ((claim or "").split("\t") + ["", "", "0"])[:3]
    return {
        "item": name,
        "downloader": downloader,
        "ip": ip,
        "times_claimed": int(times or 0),
        "claimed_at_ms": int(float(claimed_ms)) if claimed_ms is not None else None,
    }


def list_claims(admin: Admin, project: str, cursor: int = 0, count: int = 100, pattern: str = "*") -> dict:
    """One HSCAN page of claims with their holder, IP and claim time."""
    k = admin._keys(project)
    pattern = check_text(pattern, "pattern", MAX_PATTERN_CHARS)
    check_cursor(cursor)
    next_cursor, page = admin.r.hscan(k.claims, cursor, match=pattern, count=_page(count))
    names = list(page)
    times = admin.r.zmscore(k.out, names) if names else []
    return {"claims": [_claim_row(n, page[n], t) for n, t in zip(names, times)], "cursor": int(next_cursor)}


def _release(admin: Admin, k: keyspace.ProjectKeys, holder: str, names: list[str]) -> int:
    if not names:
        return 0
    for attempt in range(3):
        # Items a limit matches are held, not put back in todo; the script refuses (-2) if the
        # limits may have changed since they were read, and the last attempt does not check.
        age, compiled = limits_mod.current(admin.r, k)
        held = limits_mod.held_entries(compiled, names)
        reply = scripts.run(
            admin.r,
            "release",
            (
                k.settings,
                k.out,
                k.claims,
                k.todo,
                k.downloader_claims,
                k.stats,
                k.limited_in,
                k.reclaim_history,
            ),
            (
                int(time.time() * 1000),
                holder,
                age if attempt < 2 else "",
                *[limits_mod.wire(x) for pair in zip(names, held) for x in pair],
            ),
        )
        if reply[0] != limits_mod.STALE_AGE:
            break
    if reply[0] == -1:
        raise AdminError(f"unknown project {k.project!r}")
    if reply[4]:
        limits_mod.hold_new(admin.r, k)
    return reply[2]


def release(
    admin: Admin,
    project: str,
    downloader: str | None = None,
    older_than_s: float | None = None,
    pattern: str | None = None,
    cursor: int = 0,
    limit: int = 1000,
) -> dict:
    """Give claims back to todo (held when a limit matches them), a page at a time: by holder,
    by age or by name pattern.

    By age reads the oldest claims from ``out`` (ordered by claim time), so each call starts
    again at the oldest and the cursor is 0 when none is left. The others scan ``claims``.
    """
    k = admin._keys(project)
    limit = _page(limit)
    check_cursor(cursor)
    if sum(x is not None for x in (downloader, older_than_s, pattern)) != 1:
        raise AdminError("give exactly one of downloader, older_than_s, pattern")
    if downloader is not None:
        check_text(downloader, "downloader", MAX_DOWNLOADER_CHARS)
    if pattern is not None:
        check_text(pattern, "pattern", MAX_PATTERN_CHARS)
    if older_than_s is not None:
        # NaN fails the comparison; bool is not a number of seconds.
        if type(older_than_s) not in (int, float) or not 0 <= older_than_s <= MAX_AGE_S:
            raise AdminError(f"'older_than_s' must be a number of seconds from 0 to {MAX_AGE_S}")
        cutoff = int(time.time() * 1000 - older_than_s * 1000)
        names = admin.r.zrangebyscore(k.out, "-inf", cutoff, start=0, num=limit)
        released = _release(admin, k, "", names)
        # Released claims leave `out`, so the next page starts at the oldest left; a full page
        # that released nothing would be read again forever: then there is nothing more to do.
        return {"released": released, "cursor": 1 if len(names) == limit and released else 0}
    if downloader is not None:
        next_cursor, page = admin.r.hscan(k.claims, cursor, count=limit)
        names = [n for n, claim in page.items() if claim.split("\t", 1)[0] == downloader]
        return {"released": _release(admin, k, downloader, names), "cursor": int(next_cursor)}
    next_cursor, page = admin.r.hscan(k.claims, cursor, match=pattern, count=limit)
    return {"released": _release(admin, k, "", list(page)), "cursor": int(next_cursor)}


def pause(admin: Admin, project: str, paused: bool) -> int:
    return admin.set_settings(project, {"paused": "1" if paused else "0"})


def delete_project(admin: Admin, project: str) -> None:
    """Delete PROJECT and its keys, without KEYS and without blocking Redis.

    The settings go first, so the hot path sees an unknown project at once; then every known key
    is UNLINKed (freed in the background), downloader queues found through their index, and the
    time-bucketed counters over the spans they can live (they would expire anyway).
    """
    k = admin._keys(project)
    admin.r.unlink(k.settings)
    admin.r.srem(keyspace.PROJECTS, project)
    offload.forget_project(admin.r, project)  # a maintainer removes its segment files
    fixed = [
        getattr(k, name)
        for name in keyspace.ProjectKeys.__slots__
        if name not in ("project", "tag", "settings", "downloader_queues")
    ]
    owners = [k.downloader_queue(o) for o in admin.r.sscan_iter(k.downloader_queues)]
    now_ms = int(time.time() * 1000)
    minutes = [k.minute(m) for m in range(now_ms // 60000 - 2 * 1440, now_ms // 60000 + 2)]
    hours = [k.hour(h) for h in range(now_ms // 3_600_000 - 61 * 24, now_ms // 3_600_000 + 2)]
    days = range(now_ms // 86_400_000 - 63, now_ms // 86_400_000 + 2)
    uniques = [k.uniques(kind, d) for d in days for kind in ("downloaders", "ips")]
    history = [k.top_history(s) for s, _, _ in stats_mod.TOP_HISTORY_TIERS]
    every = (
        fixed
        + owners
        + [k.downloader_queues]
        + minutes
        + hours
        + uniques
        + history
        + bloom.all_chunk_keys(admin.r, k)
    )
    for i in range(0, len(every), DELETE_CHUNK):
        admin.r.unlink(*every[i : i + DELETE_CHUNK])


# -- pattern and item-type limits ---------------------------------------------------------------


def add_limit(admin: Admin, project: str, name, pattern, rate, reclassify: bool = True) -> dict:
    """Add or replace limit NAME (see tracker_core.limits); RATE is `N/s`, `N/m` or a number."""
    check_text(name, "name", 64)
    check_text(pattern, "pattern", MAX_PATTERN_CHARS)
    if type(rate) in (int, float):
        rate = str(rate)
    check_text(rate, "rate", 40)
    if type(reclassify) is not bool:
        raise AdminError("'reclassify' must be true or false")
    age = admin.add_limit(project, name, pattern, rate, reclassify=reclassify)
    return {"limit": name, "settings_age": age}


def remove_limit(admin: Admin, project: str, name) -> dict:
    check_text(name, "name", 64)
    try:
        age = admin.remove_limit(project, name)
    except AdminError as exc:
        if str(exc).startswith("unknown limit"):
            raise NotFound(f"unknown limit {name!r} in {project}") from None
        raise
    return {"removed": name, "settings_age": age}


def reclassify(admin: Admin, project: str) -> dict:
    return {"held": admin.reclassify(project)}


# -- dead items (reclaimed more than max_reclaims times) ----------------------------------------


def _dead_row(name: str, history: str) -> dict:
    try:
        record = json.loads(history)
    except ValueError:
        record = None
    return {"item": name, **(record if isinstance(record, dict) else {"history": history})}


def list_dead(admin: Admin, project: str, cursor: int = 0, count: int = 100) -> dict:
    """One HSCAN page of dead items with their history."""
    k = admin._keys(project)
    check_cursor(cursor)
    next_cursor, page = admin.r.hscan(k.dead, cursor, count=_page(count))
    return {"dead": [_dead_row(n, h) for n, h in page.items()], "cursor": int(next_cursor)}


def requeue_dead(admin: Admin, project: str, names, queue: str = "todo") -> dict:
    """Put the dead items NAMES (at most MAX_PAGE) back into QUEUE with a fresh claim count."""
    check_items(names)
    if not names or len(names) > MAX_PAGE:
        raise AdminError(f"give 1 to {MAX_PAGE} item names")
    check_queue(queue)
    return {"requeued": admin.requeue_dead(project, names, queue)}


def requeue_dead_page(
    admin: Admin, project: str, cursor: int = 0, count: int = 1000, queue: str = "todo"
) -> dict:
    """Requeue one HSCAN page of dead items; continue from the returned cursor until it is 0."""
    k = admin._keys(project)
    check_queue(queue)
    check_cursor(cursor)
    next_cursor, page = admin.r.hscan(k.dead, cursor, count=_page(count))
    moved = admin.requeue_dead(project, list(page), queue) if page else 0
    return {"requeued": moved, "cursor": int(next_cursor)}


# -- redo: re-queue done or seen items on purpose (the one way past the Bloom filter) -----------


def redo(
    admin: Admin,
    project: str,
    names=None,
    pattern=None,
    cursor: int = 0,
    limit: int = 1000,
    queue: str = REDO_QUEUE,
    even_if_offloaded: bool = False,
) -> dict:
    """Re-queue the items NAMES (at most MAX_PAGE), or one SSCAN page of done items matching
    PATTERN (a Redis glob; continue from the returned cursor until it is 0), into QUEUE.

    See Admin.redo_items: done items leave `done` (items_done drops with them), items seen by
    the filter but found nowhere are queued bypassing it, items out or queued stay where they
    are (skipped), items a limit matches are held.
    """
    if (names is None) == (pattern is None):
        raise AdminError("give 'items' (a list of names) or 'pattern' (a glob over done items)")
    check_queue(queue)
    if type(even_if_offloaded) is not bool:
        raise AdminError("'even_if_offloaded' must be true or false")
    if names is not None:
        check_items(names)
        if not names or len(names) > MAX_PAGE:
            raise AdminError(f"give 1 to {MAX_PAGE} item names")
        return admin.redo_items(project, names, queue, even_if_offloaded)
    check_text(pattern, "pattern", MAX_PATTERN_CHARS)
    check_cursor(cursor)
    k = admin._keys(project)
    next_cursor, page = admin.r.sscan(k.done, cursor, match=pattern, count=_page(limit))
    # A done name past the length limit (stored before the limit) could be claimed but not
    # reported: it stays done, counted apart.
    fit = [n for n in page if len(n) <= MAX_ITEM_CHARS]
    result = admin.redo_items(project, fit, queue, even_if_offloaded)
    result["skipped_by_reason"]["too_long"] = len(page) - len(fit)
    result["skipped"] += len(page) - len(fit)
    result["cursor"] = int(next_cursor)
    return result


# -- backfeed: secrets and the shard map --------------------------------------------------------


def create_backfeed_secret(admin: Admin, project: str) -> dict:
    """A new secret for PROJECT, returned once with the backfeed path (only its hash is kept)."""
    secret_id, secret = backfeed_secrets.create(admin.r, admin._keys(project))
    return {"id": secret_id, "secret": secret, "path": f"/backfeed/legacy/{project}-{secret}"}


def list_backfeed_secrets(admin: Admin, project: str) -> list[dict]:
    return backfeed_secrets.list_secrets(admin.r, admin._keys(project))


def revoke_backfeed_secret(admin: Admin, project: str, secret_id) -> dict:
    k = admin._keys(project)
    try:
        revoked = backfeed_secrets.revoke(admin.r, k, secret_id)
    except backfeed_secrets.SecretError as exc:
        raise AdminError(str(exc)) from None
    if not revoked:
        raise NotFound(f"no backfeed secret {secret_id!r} in {project}")
    return {"revoked": revoked}


def shard_map(admin: Admin, project: str, cursor: int = 0, count: int = 1000) -> dict:
    """The shard -> queue map (set by admins) and one HSCAN page of items counted per shard."""
    k = admin._keys(project)
    check_cursor(cursor)
    next_cursor, items = admin.r.hscan(k.backfeed_shards, cursor, count=_page(count))
    return {
        "map": admin.r.hgetall(k.backfeed_shard_map),
        "items": {s: int(n) for s, n in items.items()},
        "cursor": int(next_cursor),
    }


def _check_shard(shard) -> str:
    if type(shard) is not str or not SHARD_RE.match(shard):
        raise AdminError(f"bad shard name {str(shard)[:80]!r}: use 1 to 64 of A-Z, a-z, 0-9 and _ . : -")
    return shard


def map_shard(admin: Admin, project: str, shard, queue) -> dict:
    """Send backfeed SHARD's new items to QUEUE (every node picks it up within a second)."""
    k = admin._keys(project)
    _queue_key(k, queue)
    admin.r.hset(k.backfeed_shard_map, _check_shard(shard), queue)
    return {"shard": shard, "queue": queue}


def unmap_shard(admin: Admin, project: str, shard) -> dict:
    """Send SHARD's items to todo:backfeed again."""
    k = admin._keys(project)
    if not admin.r.hdel(k.backfeed_shard_map, _check_shard(shard)):
        raise NotFound(f"shard {shard!r} of {project} is not mapped")
    return {"shard": shard, "queue": "backfeed"}


# -- offloaded segments (read only here: export and import touch the filesystem) ----------------


def list_segments(admin: Admin, project: str) -> dict:
    """Registered segments (number -> items and the queue, or done, they came from) and the
    items on their way to one."""
    k = admin._keys(project)
    sources = offload.segment_sources(admin.r, k)
    return {
        "segments": {
            str(n): {"items": c, "source": sources.get(n, "todo")}
            for n, c in sorted(offload.registry(admin.r, k).items())
        },
        "offloading": admin.r.scard(k.offloading),
    }


# -- the warrior HQ document's global fields ----------------------------------------------------


def set_hq(admin: Admin, values) -> dict:
    """Set the HQ document's global fields (auto_project, broadcast_message, seesaw_version:
    projects.json; tracker_banner_html: the front page)."""
    if not isinstance(values, dict) or not values:
        raise AdminError(f"give one or more of {', '.join(sorted(hq.HQ_FIELDS))}")
    for name, value in values.items():
        if name not in hq.HQ_FIELDS:
            raise AdminError(f"unknown HQ field {str(name)[:80]!r}: use {', '.join(sorted(hq.HQ_FIELDS))}")
        check_text(value, name, HQ_MAX_CHARS[name], empty_ok=True)
    try:
        hq.set_fields(admin.r, values)
    except ValueError as exc:
        raise AdminError(str(exc)) from None
    return {"hq": values}
