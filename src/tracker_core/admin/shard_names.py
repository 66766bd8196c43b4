"""Which shard holds a named item, for the admin verbs that take names (docs/sharding.md).

An item lives on the shard its name hashes to, ``crc32(name) mod N``; on a project that gained
shards since the item was added (``tracker project grow``) it may live where it hashed to then,
one of the name's earlier candidate shards (ShardLayout.candidates). A one-shard or never-grown
project costs no Redis call here.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker_core import item_status
from tracker_core.keys import ProjectKeys
from tracker_core.shard_layout import ShardLayout


def holding(conn, layout: ShardLayout, names, probe: Callable[[ProjectKeys, str], tuple]) -> dict[int, list]:
    """NAMES grouped by the shard that holds each (no empty groups): on a grown project the first
    of a name's candidate shards where PROBE(keys, name), a Redis command answering 1 or 0, finds
    it (every probe in one round trip), else the shard it hashes to today."""
    if not layout.grown:
        return layout.split(names)
    asked = [(name, index) for name in names for index in layout.candidates(name)]
    pipe = conn.pipeline(transaction=False)
    for name, index in asked:
        pipe.execute_command(*probe(layout.keys[index], name))
    where: dict = {}
    for (name, index), found in zip(asked, pipe.execute()):
        if found:
            where.setdefault(name, index)
    groups: dict[int, list] = {}
    for name in names:
        groups.setdefault(where.get(name, layout.shard_of(name)), []).append(name)
    return groups


def lookup(conn, layout: ShardLayout, name: str, owners: item_status.Owners) -> tuple[int, dict | None]:
    """(shard, item_status.lookup's answer) of NAME: the shard it hashes to, or on a grown
    project the first candidate where it is found (the shard it hashes to when none has it)."""
    nowhere = None
    for index in layout.candidates(name) if layout.grown else [layout.shard_of(name)]:
        place = item_status.lookup(conn, layout.keys[index], name, owners)
        if place is None or place["status"] is not None:
            return index, place
        nowhere = nowhere or (index, place)
    return nowhere


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
