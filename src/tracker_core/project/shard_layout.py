"""Where a project's items live: its shards' hash tags, and the one shard each item belongs to.

A project has N shards (docs/sharding.md). With N = 1, the default, it is today's layout: one
hash tag ``{PROJECT}``, one Redis Cluster slot, one primary. With N > 1, shard 0 keeps that tag
and shard I its own, ``{PROJECT.I}`` or ``{PROJECT.I.SALT}``: the salt is picked at creation
so that on a Cluster consecutive shards land on different primaries (a dot is in no project name,
so no tag of one project is another project's). Every shard holds a whole project's key layout
(tracker_core.keyspace.ProjectKeys with the shard's tag): its own copy of the settings and blocks,
its queues, claims, done set, Bloom filter partition, counters and log, so that every script
stays atomic on one shard and unchanged.

An item belongs to shard ``crc32(name) mod N``: its place in a queue, its claim, done, release,
status and its Bloom filter entry are all on that shard. The layout is fixed when the project is
created (the settings field SHARD_TAGS_FIELD, the same in every shard's copy).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from redis.crc import key_slot

from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts import wire

MAX_SHARDS = 16  # shards one project may have (at most one per primary is useful; 16 leaves room)
SHARD_TAGS_FIELD = "shard_tags"  # settings field: every shard's tag, in shard order, space-separated
SHARE_FIELD = "shard_share"  # settings field of one shard's copy: its share of project-wide limits
# settings field: the shard counts the project has had, oldest first ("3 5": created with 3,
# grown to 5); absent for a project never grown. Items added while it had G shards live on
# shard crc32(name) mod G.
GENERATIONS_FIELD = "shard_generations"
_MAX_SALT = 100_000  # tags tried per shard before giving up on a primary (a slot owner is found
# within a few tries when the primaries own comparable slot ranges)


def _tag(project: str, index: int, salt: int = 0) -> str:
    if index == 0:
        return "{" + project + "}"
    return "{" + f"{project}.{index}" + (f".{salt}" if salt else "") + "}"


def slot_of_tag(tag: str) -> int:
    """The Cluster hash slot of every key under TAG."""
    return key_slot(tag.encode())


def choose_tags(project: str, count: int, owner_of_slot: Callable[[int], str] | None = None) -> list[str]:
    """The tags of PROJECT's COUNT shards. OWNER_OF_SLOT (Cluster only) names the primary that
    serves a slot: shard I then goes to the primary I places after shard 0's in the primaries'
    sorted order (round robin), so N shards on N primaries use them all. Without it (one Redis
    or Sentinel) the tags carry no salt."""
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"shards must be between 1 and {MAX_SHARDS}")
    return more_tags(project, [_tag(project, 0)], count, owner_of_slot)


def more_tags(project: str, tags: list[str], count: int, owner_of_slot=None) -> list[str]:
    """TAGS (a project's shards, the first one's included) followed by tags for shards
    len(TAGS)..COUNT-1, placed as choose_tags places them."""
    tags = list(tags)
    if owner_of_slot is None:
        return tags + [_tag(project, i) for i in range(len(tags), count)]
    primaries = sorted({owner_of_slot(slot) for slot in range(0, 16384, 64)})
    first = primaries.index(owner_of_slot(slot_of_tag(tags[0])))
    for index in range(len(tags), count):
        wanted = primaries[(first + index) % len(primaries)]
        for salt in range(_MAX_SALT):
            tag = _tag(project, index, salt)
            if owner_of_slot(slot_of_tag(tag)) == wanted:
                break
        else:  # a primary with almost no slots: any place will do
            tag = _tag(project, index)
        tags.append(tag)
    return tags


def _crc(name) -> int:
    """The hash that places a name (item, downloader or IP): CRC-32 of the bytes Redis holds."""
    return zlib.crc32(wire(name))


class ShardLayout:
    """The shards of one project: their keys in shard order, and the shard of an item."""

    __slots__ = ("project", "tags", "keys", "count", "generations")

    def __init__(self, project: str, tags: Iterable[str], generations: Iterable[int] = ()):
        self.project = project
        self.tags = tuple(tags)
        self.keys = tuple(ProjectKeys(project, tag) for tag in self.tags)
        self.count = len(self.keys)
        # The shard counts the project had before this one (shard_generations), oldest first.
        self.generations = tuple(g for g in generations if 1 <= g < self.count)

    @classmethod
    def single(cls, project: str) -> ShardLayout:
        return cls(project, (_tag(project, 0),))

    @classmethod
    def from_settings(cls, project: str, values: dict) -> ShardLayout:
        """The layout a shard's settings record (none recorded: one shard)."""
        text = values.get(SHARD_TAGS_FIELD) or ""
        tags = text.split()
        if len(tags) <= 1:
            return cls.single(project)
        counts = (values.get(GENERATIONS_FIELD) or "").split()
        return cls(project, tags, (int(c) for c in counts if c.isdigit()))

    @property
    def sharded(self) -> bool:
        return self.count > 1

    @property
    def grown(self) -> bool:
        """Whether shards were added since creation: older items may live elsewhere."""
        return bool(self.generations)

    def candidates(self, name) -> list[int]:
        """The shards NAME may live on, where it would be added today first: one for a
        project never grown, one per earlier shard count past that (docs/sharding.md)."""
        crc = _crc(name)
        found = [crc % self.count]
        for count in reversed(self.generations):
            if crc % count not in found:
                found.append(crc % count)
        return found

    def shard_of(self, name) -> int:
        """The index of the shard ITEM NAME belongs to."""
        if self.count == 1:
            return 0
        return _crc(name) % self.count

    def uniques_shard(self, member) -> int:
        """The shard whose daily uniques count MEMBER (a downloader or an IP): picked over the
        shards the project was created with, so that a grown project keeps counting each member
        where it did (the shards' sets stay disjoint and their counts add up)."""
        count = self.generations[0] if self.generations else self.count
        return _crc(member) % count if count > 1 else 0

    def keys_of(self, name) -> ProjectKeys:
        return self.keys[self.shard_of(name)]

    def split(self, names: Iterable) -> dict[int, list]:
        """NAMES grouped by shard index, each group in the order given (no empty groups)."""
        if self.count == 1:
            names = list(names)
            return {0: names} if names else {}
        groups: dict[int, list] = {}
        count = self.count
        for name in names:
            groups.setdefault(_crc(name) % count, []).append(name)
        return groups

    def describe(self, owner_of_slot: Callable[[int], str] | None = None) -> list[dict]:
        """One line per shard for `tracker project show`: its index, tag, slot and node."""
        return [
            {
                "shard": index,
                "tag": tag,
                "slot": slot_of_tag(tag),
                "node": owner_of_slot(slot_of_tag(tag)) if owner_of_slot else "",
            }
            for index, tag in enumerate(self.tags)
        ]


def slot_owner(conn) -> Callable[[int], str] | None:
    """For a redis-py Cluster client CONN: slot -> "host:port" of the primary serving it, from
    the client's slot map; None for any other client (one Redis or Sentinel: no placement)."""
    manager = getattr(conn, "nodes_manager", None)
    if manager is None:
        return None
    return lambda slot: manager.get_node_from_slot(slot).name


def summed(parts: list[dict]) -> dict:
    """The figures of several shards as one project's: numbers added key by key (nested dicts
    too), anything else (a name, a flag) taken from the first shard's."""

    def add(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return {
                key: add(a[key], b[key]) if key in a and key in b else a.get(key, b.get(key)) for key in a | b
            }
        if type(a) in (int, float) and type(b) in (int, float):
            return a + b
        return a

    total = parts[0]
    for part in parts[1:]:
        total = add(total, part)
    return total
