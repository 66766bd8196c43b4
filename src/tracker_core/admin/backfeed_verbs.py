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
    only an empty filter allows. A sharded project's figures are its shards' added up, layer by
    layer (each shard filters its own items at the same rate). Showing stores nothing: a filter
    never configured is shown with the geometry its first item will give it."""
    layout = ctx.layout(project)
    wanted = _wanted_geometry(capacity, fp_rate, kind, len(layout.keys))
    if wanted is not None:
        for k in ctx.shards(project):  # the first shard last
            geometry = bloom.configure(ctx.conn, k, wanted, replace=True)
            if geometry == scripts.bloom_configure.codes.UNKNOWN_PROJECT:
                raise NotFound(f"unknown project {project!r}")
            if geometry == scripts.bloom_configure.codes.NOT_A_NUMBER:
                raise Conflict(f"{project}'s filter settings are damaged (not a number)")
            if isinstance(geometry, int):
                raise Conflict(f"{project}'s filter already holds items; its geometry can't change")
        total = wanted.capacity * len(layout.keys)
        ctx.audit("backfeed.filter", project, capacity=total, fp_rate=wanted.fp_rate, kind=wanted.kind)
    return _shown(ctx.conn, layout.keys)


def _wanted_geometry(capacity, fp_rate, kind, shards: int) -> bloom.Geometry | None:
    """The geometry each of SHARDS shards gets (the capacity shared out, the rate kept), or None
    when nothing is asked; BadInput past a bound, before anything is written."""
    if capacity is None and fp_rate is None and kind is None:
        return None
    if capacity is not None and (
        type(capacity) is not int or not 1 <= capacity <= bloom_geometry.MAX_CAPACITY
    ):
        raise BadInput(f"'capacity' must be an integer from 1 to {bloom_geometry.MAX_CAPACITY:,}")
    if fp_rate is not None and (type(fp_rate) not in (int, float) or not 1e-15 <= fp_rate <= 0.5):
        raise BadInput("'fp_rate' must be a number from 1e-15 to 0.5")
    if kind is not None and kind not in bloom.KINDS:
        raise BadInput(f"'kind' must be one of {', '.join(bloom.KINDS)}")
    wanted = bloom.Geometry(
        capacity=-(-(capacity or bloom_geometry.DEFAULT_CAPACITY) // shards),
        fp_rate=fp_rate or bloom_geometry.DEFAULT_FP_RATE,
        kind=kind or bloom.DEFAULT_KIND,
    )
    first_layer = wanted.layer(0).bits // 8 * shards
    if first_layer > bloom_geometry.MAX_FIRST_LAYER_BYTES:
        raise BadInput(
            f"that filter's first layer would take {first_layer / 2**30:.1f} GiB of Redis memory, "
            f"more than {bloom_geometry.MAX_FIRST_LAYER_BYTES // 2**30} GiB: ask a lower capacity "
            "or a higher fp_rate"
        )
    return wanted


def _shown(conn, shards) -> dict:
    """The filters of SHARDS (every shard's keys, in order) as one: layer I of each added up."""
    pipe = conn.pipeline(transaction=False)
    for k in shards:
        pipe.hgetall(k.bloom)
    stored = pipe.execute()
    geometries = [bloom.Geometry.from_redis(f) if "capacity" in f else bloom.Geometry() for f in stored]
    first = geometries[0]
    # A fingerprint layer's stash: names both of whose buckets were full (a crowded filter shows here).
    stashes = []
    if first.kind == bloom.FINGERPRINT:
        stashes = [(i, layer.index) for i, g in enumerate(geometries) for layer in g.all_layers()]
        for i, index in stashes:
            pipe.scard(shards[i].bloom_stash(index))
    stashed = dict(zip(stashes, pipe.execute())) if stashes else {}
    layers: dict[int, dict] = {}
    for i, (g, counts) in enumerate(zip(geometries, stored)):
        for layer in g.all_layers():
            row = layers.setdefault(layer.index, _layer_row(layer, bool(stashes)))
            row["capacity"] += layer.capacity
            row["chunks"] += layer.chunks
            row["bytes"] += layer.bits // 8
            row["items"] += int(counts.get(f"n:{layer.index}", 0))
            if stashes:
                row["stashed"] += stashed[(i, layer.index)]
    shown = {
        "kind": first.kind,
        "capacity": sum(g.capacity for g in geometries),
        "fp_rate": first.fp_rate,
        "layers": [layers[index] for index in sorted(layers)],
        "items": sum(int(counts.get("items", 0)) for counts in stored),
        "bits_per_item_at_capacity": first.layer(0).bits / first.capacity,
    }
    if len(shards) > 1:
        shown["shards"] = len(shards)
    return shown


def _layer_row(layer, stash: bool) -> dict:
    """A layer's row before the shards' figures are added in (its rate and hashing are every shard's)."""
    row = {"capacity": 0, "fp_rate": layer.fp_rate, "k": layer.k, "fingerprint_bytes": layer.slot_bytes}
    row.update(chunks=0, bytes=0, items=0)
    if stash:
        row["stashed"] = 0
    return row
