"""Which shard holds a named item, for the admin verbs that take names (docs/sharding.md).

An item lives on the shard its name hashes to, ``crc32(name) mod N``; on a project that gained
shards since the item was added (``tracker project grow``) it may live where it hashed to then,
one of the name's earlier candidate shards (ShardLayout.candidates). A one-shard or never-grown
project costs no Redis call here.
"""

from __future__ import annotations

from tracker_core.items import item_status
from tracker_core.items.shard_router import first_seen_earlier, found_at, holding, lookup
from tracker_core.project.shard_layout import ShardLayout

__all__ = ["found_on", "holding", "lookup", "redo_shards"]


def found_on(conn, layout: ShardLayout, names) -> dict[int, list]:
    """NAMES grouped by the shard lookup finds each on (a grown project's candidates asked in
    turn); without a Redis call on a project never grown."""
    if not layout.grown:
        return layout.split(names)
    owners = item_status.Owners()
    groups: dict[int, list] = {}
    for name in names:
        groups.setdefault(lookup(conn, layout, name, owners)[0], []).append(name)
    return groups


def redo_shards(conn, layout: ShardLayout, names) -> dict[int, list]:
    """NAMES grouped by the shard a redo acts on: where the name is done; on a grown project a
    name done nowhere goes to the first earlier candidate whose filter has seen it (queued
    there once: the redo finds it there, or finds it offloaded or discarded), else to the shard
    it is added to today. A name done somewhere is never sent by a filter's answer, so a
    false positive of an earlier filter cannot put it on a second shard."""
    if not layout.grown:
        return layout.split(names)
    done_at = found_at(conn, layout, names, lambda k, name: ("SISMEMBER", k.done, name))
    seen_at = first_seen_earlier(conn, layout, [n for n in names if n not in done_at])
    groups: dict[int, list] = {}
    for name in names:
        groups.setdefault(done_at.get(name, seen_at.get(name, layout.shard_of(name))), []).append(name)
    return groups
