"""Transition shim: the admin verbs live in tracker_core.admin (one module per subject).

Each function here keeps its old signature and answer and calls the verb with a context that
does not audit (actor None): the faces that still call these audit on their own. The lead
deletes this module once every face has switched to the verbs.
"""

from __future__ import annotations

from tracker_core.admin import backfeed, checks, claims, dead, hq, items, limits, projects, segments
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, NotFound  # noqa: F401  (old imports)
from tracker_core.admin.hq import HQ_MAX_CHARS  # noqa: F401
from tracker_core.admin.items import REDO_QUEUE

MAX_PAGE = checks.MAX_PAGE
MAX_SAMPLE = checks.MAX_SAMPLE
MAX_CURSOR = checks.MAX_CURSOR
MAX_PATTERN_CHARS = checks.MAX_PATTERN_CHARS
MAX_ITEM_CHARS = checks.MAX_ITEM_CHARS
MAX_DOWNLOADER_CHARS = checks.MAX_DOWNLOADER_CHARS
MAX_AGE_S = checks.MAX_AGE_S
SHARD_RE = backfeed.SHARD_RE

check_text = checks.text
check_cursor = checks.cursor
check_items = checks.items
check_queue = checks.queue


def _ctx(admin) -> AdminContext:
    return AdminContext(admin.r, None)


def sample(admin, project: str, queue: str, count: int = 20) -> list[str]:
    return items.sample(_ctx(admin), project, queue, count)["items"]


def count(admin, project: str, queue: str) -> int:
    return items.count(_ctx(admin), project, queue)["count"]


def clear(admin, project: str, queue: str) -> int:
    return items.clear(_ctx(admin), project, queue)["dropped"]


def move(admin, project, source, target, pattern="*", cursor=0, limit=1000) -> dict:
    return items.move(_ctx(admin), project, source, target, pattern, cursor, limit)


def list_claims(admin, project: str, cursor: int = 0, count: int = 100, pattern: str = "*") -> dict:
    return claims.list_claims(_ctx(admin), project, cursor, count, pattern)


def release(admin, project, downloader=None, older_than_s=None, pattern=None, cursor=0, limit=1000) -> dict:
    return claims.release(_ctx(admin), project, downloader, older_than_s, pattern, cursor, limit)


def pause(admin, project: str, paused: bool) -> int:
    verb = projects.pause if paused else projects.resume
    return verb(_ctx(admin), project)["settings_age"]


def delete_project(admin, project: str) -> None:
    projects.delete(_ctx(admin), project)


def add_limit(admin, project: str, name, pattern, rate, reclassify: bool = True) -> dict:
    return limits.add(_ctx(admin), project, name, pattern, rate, reclassify)


def remove_limit(admin, project: str, name) -> dict:
    return limits.remove(_ctx(admin), project, name)


def reclassify(admin, project: str) -> dict:
    return limits.reclassify(_ctx(admin), project)


def list_dead(admin, project: str, cursor: int = 0, count: int = 100) -> dict:
    return dead.list_dead(_ctx(admin), project, cursor, count)


def requeue_dead(admin, project: str, names, queue: str = "todo") -> dict:
    return dead.requeue(_ctx(admin), project, names, queue)


def requeue_dead_page(admin, project: str, cursor: int = 0, count: int = 1000, queue: str = "todo") -> dict:
    return dead.requeue_page(_ctx(admin), project, cursor, count, queue)


def redo(
    admin, project, names=None, pattern=None, cursor=0, limit=1000, queue=REDO_QUEUE, even_if_offloaded=False
) -> dict:
    return items.redo(_ctx(admin), project, names, pattern, cursor, limit, queue, even_if_offloaded)


def create_backfeed_secret(admin, project: str) -> dict:
    return backfeed.create_secret(_ctx(admin), project)


def list_backfeed_secrets(admin, project: str) -> list[dict]:
    return backfeed.list_secrets(_ctx(admin), project)


def revoke_backfeed_secret(admin, project: str, secret_id) -> dict:
    return backfeed.revoke_secret(_ctx(admin), project, secret_id)


def shard_map(admin, project: str, cursor: int = 0, count: int = 1000) -> dict:
    return backfeed.shard_map(_ctx(admin), project, cursor, count)


def map_shard(admin, project: str, shard, queue) -> dict:
    return backfeed.map_shard(_ctx(admin), project, shard, queue)


def unmap_shard(admin, project: str, shard) -> dict:
    return backfeed.unmap_shard(_ctx(admin), project, shard)


def list_segments(admin, project: str) -> dict:
    return segments.list_segments(_ctx(admin), project)


def set_hq(admin, values) -> dict:
    return hq.set_fields(_ctx(admin), values)
