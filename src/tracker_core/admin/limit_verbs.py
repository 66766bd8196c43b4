"""Pattern and item-type limits (tracker_core.project.pattern_limits) and blocks (tracker_core.blocks).

Both change what a claim may take, and both are enforced by the claim script from keys in the
project's slot: limits through the settings age every node reloads at, blocks through a block
index rebuilt in the same script that changes them.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker_core import keyspace, scripts
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, Conflict, NotFound
from tracker_core.blocks import BadEntry, index_members, normalise
from tracker_core.project import pattern_limits

MAX_LIMIT_NAME_CHARS = 64
MAX_RATE_CHARS = 40
BLOCK_WRITE_ATTEMPTS = 50
# The set-limit script's refusals that name something missing; its others are bad input.
NOT_FOUND = {scripts.set_limit.codes.UNKNOWN_PROJECT, scripts.set_limit.codes.UNKNOWN_LIMIT}


def _typed(exc: pattern_limits.LimitError) -> BadInput | NotFound:
    return (NotFound if exc.code in NOT_FOUND else BadInput)(str(exc))


# -- pattern and item-type limits ---------------------------------------------------------------


def list_limits(ctx: AdminContext, project: str) -> list[dict]:
    """A project's limits in classification order (the first match wins)."""
    return [limit.as_dict() for limit in pattern_limits.load(ctx.conn, ctx.keys(project))]


def add(ctx: AdminContext, project: str, name, pattern, rate, reclassify: bool = True) -> dict:
    """Add or replace limit NAME: PATTERN is type:T, prefix:P, domain:D or regex:R, RATE `N/s`,
    `N/m` or a number. With RECLASSIFY, queued items it now matches are held at once (a scan of
    the shared queues: pass False when adding many, then reclassify once)."""
    checks.text(name, "name", MAX_LIMIT_NAME_CHARS)
    checks.text(pattern, "pattern", checks.MAX_PATTERN_CHARS)
    if type(rate) in (int, float):
        rate = str(rate)
    checks.text(rate, "rate", MAX_RATE_CHARS)
    checks.flag(reclassify, "reclassify")
    shards = ctx.shards(project)
    try:
        for k in shards:  # the first shard last: its age is the one the nodes follow
            age = pattern_limits.add(ctx.conn, k, name, pattern, rate)
    except pattern_limits.LimitError as exc:
        raise _typed(exc) from None
    if reclassify:
        for k in shards:
            pattern_limits.reclassify(ctx.conn, k)
    ctx.audit("limit.add", project, name=name, pattern=pattern, rate=rate, reclassify=reclassify)
    return {"limit": name, "settings_age": age}


def remove(ctx: AdminContext, project: str, name) -> dict:
    checks.text(name, "name", MAX_LIMIT_NAME_CHARS)
    try:
        for k in ctx.shards(project):
            age = pattern_limits.remove(ctx.conn, k, name)
    except pattern_limits.LimitError as exc:  # a bad name, or no such limit (or project)
        raise _typed(exc) from None
    ctx.audit("limit.remove", project, name=name)
    return {"removed": name, "settings_age": age}


def reclassify(ctx: AdminContext, project: str) -> dict:
    """Hold the queued items the current limits match (queued before a limit, or released)."""
    held = sum(pattern_limits.reclassify(ctx.conn, k) for k in ctx.shards(project))
    ctx.audit("limit.reclassify", project, held=held)
    return {"held": held}


# -- blocks -------------------------------------------------------------------------------------


def write_blocks(ctx: AdminContext, k: keyspace.ProjectKeys, change: Callable) -> bool:
    """Apply CHANGE(own, global copy) -> (own, global copy) to K's blocks and rebuild the index,
    in one script that first checks nobody changed them since the read; False for a project that
    does not exist (any more). Conflict when they kept changing."""
    r = ctx.conn
    for _ in range(BLOCK_WRITE_ATTEMPTS):
        own, copy = (
            set(x)
            for x in r.pipeline(transaction=False).smembers(k.blocked).smembers(k.blocked_global).execute()
        )
        new_own, new_copy = change(own, copy)
        index = index_members(new_own, new_copy)
        done = scripts.set_blocks(
            r,
            k,
            own_read=list(own),
            copy_read=list(copy),
            own=list(new_own),
            copy=list(new_copy),
            index=index,
        )
        if done != scripts.set_blocks.codes.CHANGED:
            return done == scripts.set_blocks.codes.REPLACED
    raise Conflict(f"the blocks of {k.project!r} kept changing: try again")


def _project_names(ctx: AdminContext) -> list[str]:
    return sorted(ctx.conn.smembers(keyspace.PROJECTS))


def _shards_of(ctx: AdminContext, name: str) -> tuple[keyspace.ProjectKeys, ...]:
    """Every shard of project NAME, listed in PROJECTS but perhaps deleted a moment ago: no
    settings then (one shard, whose writes find no project)."""
    return ctx.shards(name, must_exist=False)


def block(ctx: AdminContext, entry, project: str | None = None, remove: bool = False) -> dict:
    """Block (or with REMOVE lift) ip:ADDRESS, ip:CIDR or name:DOWNLOADER in PROJECT, or in all
    projects; the entry as stored (blocks.normalise: ip:10.0.0.1/32 is ip:10.0.0.1).

    Global blocks are copied into every project's ``blocked_global`` (the claim script reads
    only keys in the project's slot, for Redis Cluster), apart from the project's own
    ``blocked``: a project block and a global block of the same entry are lifted apart.
    """
    try:
        entry = normalise(entry)
    except BadEntry as exc:
        raise BadInput(str(exc)) from None

    def change(entries: set[str]) -> set[str]:
        return entries - {entry} if remove else entries | {entry}

    if project is not None:
        for k in ctx.shards(project):
            if not write_blocks(ctx, k, lambda own, copy: (change(own), copy)):
                raise NotFound(f"unknown project {project!r}")
    else:
        (ctx.conn.srem if remove else ctx.conn.sadd)(keyspace.GLOBAL_BLOCKED, entry)
        for name in _project_names(ctx):
            for k in _shards_of(ctx, name):
                write_blocks(ctx, k, lambda own, copy: (own, change(copy)))
    ctx.audit("block.remove" if remove else "block.add", project, entry=entry)
    return {"entry": entry, "blocked": not remove}


def blocks(ctx: AdminContext, project: str | None = None) -> dict:
    """The global entries, or PROJECT's own and its copy of the global ones."""
    r = ctx.conn
    if project is None:
        return {"global": sorted(r.smembers(keyspace.GLOBAL_BLOCKED))}
    k = ctx.keys(project)
    return {
        "project": project,
        "blocked": sorted(r.smembers(k.blocked)),
        "blocked_global": sorted(r.smembers(k.blocked_global)),
        "ignore_global_blocked": r.hget(k.settings, "ignore_global_blocked") == "1",
    }


def reindex_blocks(ctx: AdminContext) -> dict:
    """Rebuild every project's block index, its global copy from the global list (entries of
    the project's own set that are global are taken as copies, as a tracker before the split
    kept them). For upgrades and repairs."""
    done = 0
    for name in _project_names(ctx):
        glob = set(ctx.conn.smembers(keyspace.GLOBAL_BLOCKED))
        for k in _shards_of(ctx, name):
            wrote = write_blocks(ctx, k, lambda own, copy, glob=glob: (own - glob, glob))
        done += wrote
    ctx.audit("block.reindex", None, projects=done)
    return {"projects": done}


def reindex_blocks_if_missing(ctx: AdminContext) -> dict:
    """Build the block index of projects that have blocks but no index (a Redis from before the
    index: their blocks would not be enforced); audited only when some were built. Projects whose
    settings lack blocked_index_size (made before it: their claims read the index every time)
    have their blocks written again unchanged, which records it; no block changes, so neither
    counted nor audited."""
    r = ctx.conn
    glob = set(r.smembers(keyspace.GLOBAL_BLOCKED))
    done = 0
    for name in _project_names(ctx):
        for k in _shards_of(ctx, name):
            has_blocks = glob or r.scard(k.blocked) or r.scard(k.blocked_global)
            if has_blocks and not r.exists(k.blocked_index):
                done += write_blocks(ctx, k, lambda own, copy: (own - glob, glob))
            elif not r.hexists(k.settings, "blocked_index_size"):
                write_blocks(ctx, k, lambda own, copy: (own, copy))
    if done:
        ctx.audit("block.reindex", None, projects=done)
    return {"projects": done}
