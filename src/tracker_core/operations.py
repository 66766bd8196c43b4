"""Admin operations on queues and claims that work a page at a time (millions of claims).

Nothing here loads a whole structure: queues are read with SSCAN and SRANDMEMBER, claims with
HSCAN or a range of the ``out`` index by claim time, and every change goes through one script
per page. Each call returns a cursor; the caller (API, CLI) continues from it.
"""
from __future__ import annotations

import time

from tracker_core import keys as keyspace
from tracker_core import bloom, scripts
from tracker_core.admin import Admin, AdminError

MAX_PAGE = 10_000
MAX_SAMPLE = 1000
DELETE_CHUNK = 500


def _queue_key(k: keyspace.ProjectKeys, queue: str) -> str:
    try:
        return k.queue(queue)
    except ValueError as exc:
        raise AdminError(str(exc)) from None


def _page(count: int) -> int:
    return max(1, min(int(count), MAX_PAGE))


def sample(admin: Admin, project: str, queue: str, count: int = 20) -> list[str]:
    k = admin._keys(project)
    return admin.r.srandmember(_queue_key(k, queue), max(1, min(count, MAX_SAMPLE)))


def count(admin: Admin, project: str, queue: str) -> int:
    k = admin._keys(project)
    return admin.r.scard(_queue_key(k, queue))


def clear(admin: Admin, project: str, queue: str) -> int:
    k = admin._keys(project)
    return scripts.run(admin.r, "clear_queue", (k.settings, _queue_key(k, queue)), ())


def move(admin: Admin, project: str, source: str, target: str, pattern: str = "*",
         cursor: int = 0, limit: int = 1000) -> dict:
    """Move items matching PATTERN (a Redis glob) from SOURCE to TARGET, one SSCAN page."""
    k = admin._keys(project)
    source_key, target_key = _queue_key(k, source), _queue_key(k, target)
    if source_key == target_key:
        raise AdminError("source and target queue are the same")
    owner = target[len("downloader:"):] if target.startswith("downloader:") else ""
    next_cursor, names = admin.r.sscan(source_key, cursor, match=pattern or "*", count=_page(limit))
    moved = 0
    if names:
        moved = scripts.run(admin.r, "move_items", (k.settings, source_key, target_key,
                                                     k.downloader_queues), (owner, *names))
    return {"moved": moved, "cursor": int(next_cursor)}


def _claim_row(name: str, claim: str | None, claimed_ms) -> dict:
    downloader, ip, times = ((claim or "").split("\t") + ["", "", "0"])[:3]
    return {"item": name, "downloader": downloader, "ip": ip, "times_claimed": int(times or 0),
            "claimed_at_ms": int(float(claimed_ms)) if claimed_ms is not None else None}


def list_claims(admin: Admin, project: str, cursor: int = 0, count: int = 100,
                pattern: str = "*") -> dict:
    """One HSCAN page of claims with their holder, IP and claim time."""
    k = admin._keys(project)
    next_cursor, page = admin.r.hscan(k.claims, cursor, match=pattern or "*", count=_page(count))
    names = list(page)
    times = admin.r.zmscore(k.out, names) if names else []
    return {"claims": [_claim_row(n, page[n], t) for n, t in zip(names, times)],
            "cursor": int(next_cursor)}


def _release(admin: Admin, k: keyspace.ProjectKeys, holder: str, names: list[str]) -> int:
    if not names:
        return 0
    reply = scripts.run(admin.r, "release", (k.settings, k.out, k.claims, k.todo,
                                             k.downloader_claims, k.stats),
                        (int(time.time() * 1000), holder, *names))
    if reply[0] == -1:
        raise AdminError(f"unknown project {k.project!r}")
    return reply[2]


def release(admin: Admin, project: str, downloader: str | None = None,
            older_than_s: float | None = None, pattern: str | None = None, cursor: int = 0,
            limit: int = 1000) -> dict:
    """Give claims back to todo, a page at a time: by holder, by age or by name pattern.

    By age reads the oldest claims from ``out`` (ordered by claim time), so each call starts
    again at the oldest and the cursor is 0 when none is left. The others scan ``claims``.
    """
    k = admin._keys(project)
    limit = _page(limit)
    if sum(x is not None for x in (downloader, older_than_s, pattern)) != 1:
        raise AdminError("give exactly one of downloader, older_than_s, pattern")
    if older_than_s is not None:
        cutoff = int(time.time() * 1000 - float(older_than_s) * 1000)
        names = admin.r.zrangebyscore(k.out, "-inf", cutoff, start=0, num=limit)
        released = _release(admin, k, "", names)
        return {"released": released, "cursor": 1 if len(names) == limit else 0}
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
    fixed = [getattr(k, name) for name in keyspace.ProjectKeys.__slots__
             if name not in ("project", "tag", "settings", "downloader_queues")]
    owners = [k.downloader_queue(o) for o in admin.r.sscan_iter(k.downloader_queues)]
    now_ms = int(time.time() * 1000)
    minutes = [k.minute(m) for m in range(now_ms // 60000 - 2 * 1440, now_ms // 60000 + 2)]
    hours = [k.hour(h) for h in range(now_ms // 3_600_000 - 61 * 24, now_ms // 3_600_000 + 2)]
    days = range(now_ms // 86_400_000 - 63, now_ms // 86_400_000 + 2)
    uniques = [k.uniques(kind, d) for d in days for kind in ("downloaders", "ips")]
    every = (fixed + owners + [k.downloader_queues] + minutes + hours + uniques
             + bloom.all_chunk_keys(admin.r, k))
    for i in range(0, len(every), DELETE_CHUNK):
        admin.r.unlink(*every[i:i + DELETE_CHUNK])
