"""Backfeed: the project's secrets, its shard map and its Bloom filter's geometry."""

from __future__ import annotations

import re

from tracker_core import scripts
from tracker_core.access import backfeed_secrets
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, Conflict, NotFound
from tracker_core.items import bloom, bloom_geometry

# The backfeed's ?shard= (tracker_api.warrior_api.backfeed_route).
SHARD_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")


def create_secret(ctx: AdminContext, project: str) -> dict:
    """A new secret for PROJECT, returned once with the backfeed path (only its hash is kept)."""
    first, *others = ctx.layout(project).keys
    secret_id, secret = backfeed_secrets.create(ctx.conn, first, others)
    ctx.audit("backfeed_secret.create", project, id=secret_id)  # never the secret itself
    return {"id": secret_id, "secret": secret, "path": f"/backfeed/legacy/{project}-{secret}"}


def list_secrets(ctx: AdminContext, project: str) -> list[dict]:
    return backfeed_secrets.list_secrets(ctx.conn, ctx.keys(project))


def revoke_secret(ctx: AdminContext, project: str, secret_id) -> dict:
    """Revoke the secret with id SECRET_ID (or a prefix of 6 or more only one secret has)."""
    first, *others = ctx.layout(project).keys
    try:
        revoked = backfeed_secrets.revoke(ctx.conn, first, secret_id, others)
    except backfeed_secrets.SecretError as exc:
        raise BadInput(str(exc)) from None
    if not revoked:
        raise NotFound(f"no backfeed secret {secret_id!r} in {project}")
    ctx.audit("backfeed_secret.revoke", project, id=revoked)
    return {"revoked": revoked}


def shard_map(ctx: AdminContext, project: str, cursor: int = 0, count: int = 1000) -> dict:
    """The shard -> queue map (set by admins) and one HSCAN page of items counted per shard."""
    k = ctx.keys(project)
    checks.cursor(cursor)
    next_cursor, items = ctx.conn.hscan(k.backfeed_shards, cursor, count=checks.page(count))
    return {
        "map": ctx.conn.hgetall(k.backfeed_shard_map),
        "items": {s: int(n) for s, n in items.items()},
        "cursor": int(next_cursor),
    }


def _check_shard(shard) -> str:
    if type(shard) is not str or not SHARD_RE.match(shard):
        raise BadInput(f"bad shard name {str(shard)[:80]!r}: use 1 to 64 of A-Z, a-z, 0-9 and _ . : -")
    return shard


def map_shard(ctx: AdminContext, project: str, shard, queue) -> dict:
    """Send backfeed SHARD's new items to QUEUE (every node picks it up within a second)."""
    k = ctx.keys(project)
    checks.queue_and_owner(k, queue)
    ctx.conn.hset(k.backfeed_shard_map, _check_shard(shard), queue)
    ctx.audit("backfeed_shard.map", project, shard=shard, queue=queue)
    return {"shard": shard, "queue": queue}


def unmap_shard(ctx: AdminContext, project: str, shard) -> dict:
    """Send SHARD's items to todo:backfeed again."""
    k = ctx.keys(project)
    if not ctx.conn.hdel(k.backfeed_shard_map, _check_shard(shard)):
        raise NotFound(f"shard {shard!r} of {project} is not mapped")
    ctx.audit("backfeed_shard.unmap", project, shard=shard)
    return {"shard": shard, "queue": "backfeed"}


def bloom_filter(
    ctx: AdminContext,
    project: str,
    capacity: int | None = None,
    fp_rate: float | None = None,
    kind: str | None = None,
) -> dict:
    """The project's Bloom filter (kind, layers, items, memory); with CAPACITY, FP_RATE or KIND
    ('layered', 'wide' or 'fingerprint', see tracker_core.items.bloom), set its geometry first, which
    only an empty filter allows."""
    k = ctx.keys(project)
    wanted = None
    if capacity is not None or fp_rate is not None or kind is not None:
        if capacity is not None and (type(capacity) is not int or capacity < 1):
            raise BadInput("'capacity' must be an integer of 1 or more")
        if fp_rate is not None and (type(fp_rate) not in (int, float) or not 1e-15 <= fp_rate <= 0.5):
            raise BadInput("'fp_rate' must be a number from 1e-15 to 0.5")
        if kind is not None and kind not in bloom.KINDS:
            raise BadInput(f"'kind' must be one of {', '.join(bloom.KINDS)}")
        wanted = bloom.Geometry(
            capacity=capacity or bloom_geometry.DEFAULT_CAPACITY,
            fp_rate=fp_rate or bloom_geometry.DEFAULT_FP_RATE,
            kind=kind or bloom.DEFAULT_KIND,
        )
    shards = ctx.shards(project)
    if wanted is not None and len(shards) > 1:
        # Each shard filters its own items: the capacity is shared out, the rate kept.
        per_shard = -(-wanted.capacity // len(shards))
        wanted = bloom.Geometry(capacity=per_shard, fp_rate=wanted.fp_rate, kind=wanted.kind)
        for other in shards[:-1]:
            if (
                bloom.configure(ctx.conn, other, wanted, replace=True)
                == scripts.bloom_configure.codes.NOT_EMPTY
            ):
                raise Conflict(f"{project}'s filter already holds items; its geometry can't change")
    geometry = bloom.configure(ctx.conn, k, wanted, replace=wanted is not None)
    if isinstance(geometry, int):  # one of bloom_configure's codes
        if geometry == scripts.bloom_configure.codes.UNKNOWN_PROJECT:
            raise NotFound(f"unknown project {project!r}")
        if geometry == scripts.bloom_configure.codes.NOT_A_NUMBER:
            raise Conflict(f"{project}'s filter settings are damaged (not a number)")
        raise Conflict(f"{project}'s filter already holds items; its geometry can't change")
    counts = ctx.conn.hgetall(k.bloom)
    layers = geometry.all_layers()
    # A fingerprint layer's stash: names both of whose buckets were full (a crowded filter shows here).
    stashed = {}
    if geometry.kind == bloom.FINGERPRINT:
        pipe = ctx.conn.pipeline(transaction=False)
        for layer in layers:
            pipe.scard(k.bloom_stash(layer.index))
        stashed = dict(zip((layer.index for layer in layers), pipe.execute()))
    if wanted is not None:
        ctx.audit(
            "backfeed.filter",
            project,
            capacity=geometry.capacity,
            fp_rate=geometry.fp_rate,
            kind=geometry.kind,
        )
    return {
        "kind": geometry.kind,
        "capacity": geometry.capacity,
        "fp_rate": geometry.fp_rate,
        "layers": [
            {
                "capacity": layer.capacity,
                "fp_rate": layer.fp_rate,
                "k": layer.k,
                "fingerprint_bytes": layer.slot_bytes,
                "chunks": layer.chunks,
                "bytes": layer.bits // 8,
                "items": int(counts.get(f"n:{layer.index}", 0)),
                **({"stashed": stashed[layer.index]} if stashed else {}),
            }
            for layer in layers
        ],
        "items": int(counts.get("items", 0)),
        "bits_per_item_at_capacity": geometry.layer(0).bits / geometry.capacity,
    }
