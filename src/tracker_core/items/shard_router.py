"""One sharded project's warrior calls, spread over its shards (docs/sharding.md).

The engine (tracker_core.items.engine) sends a project of one shard straight to its scripts; a
project of several comes here. Each function makes one script call per shard it needs, each
atomic on its shard, with the very scripts and bindings a one-shard project uses:

- claim: starts at the next shard in this process's rotation (so the load spreads evenly over
  shards, nodes and workers) and falls through to the others in the same request before it
  answers 404; multi=K gathers from several shards when one runs short. A shard out of reach
  (ConnectionLost: nothing was sent) is passed over; the claim answers 503 only if no other
  shard served it.
- done and release: the names split by shard, one call per shard; a done's reported bytes are
  shared out over the shards in proportion to their names, so the totals are exact.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tracker_core import scripts
from tracker_core.infra.rawredis import ConnectionLost, RedisError
from tracker_core.items import bloom, bloom_membership, item_status
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.shard_layout import ShardLayout
from tracker_core.scripts.constants import UNIQUES_TTL_S
from tracker_core.scripts.requests import DoneReply

DAY_MS = 86_400_000

# Replies after which the other shards are not asked: the same blocks and the same project are
# on every shard (a block is written to all of them), so the answer would not change.
_FINAL = frozenset((scripts.claim.codes.BLOCKED, scripts.claim.codes.UNKNOWN_PROJECT))


# Claim replies after which the client counts in the daily uniques (as uniques_seen records them).
COUNTED = frozenset((scripts.claim.codes.OK, scripts.claim.codes.NOTHING, scripts.claim.codes.RATE_LIMITED))


def count_uniques(conn, layout: ShardLayout, now_ms: int, downloader: str, ip: str) -> None:
    """Count DOWNLOADER and IP in the daily uniques of a sharded project, each on the shard its
    own name picks (ShardLayout.uniques_shard): the shards' sets are disjoint, so the day's and
    the month's counts are the shards' counts added, and no one shard takes every PFADD."""
    day = now_ms // DAY_MS
    by_shard: dict[int, list] = {}
    for kind, member in (("downloaders", downloader), ("ips", ip)):
        key = layout.keys[layout.uniques_shard(member)].uniques(kind, day)
        by_shard.setdefault(layout.uniques_shard(member), []).extend(
            (("PFADD", key, member), ("EXPIRE", key, UNIQUES_TTL_S))
        )
    for commands in by_shard.values():  # one slot per pipeline (a Cluster serves no other)
        conn.pipeline(commands)


# How long a process tries a shard that just answered "nothing" after the others: at the end of
# a project most shards are empty, and a claim that started at one cost a call per empty shard
# (shard_scale.md: 2.5 calls a claim with 1 of 4 shards full). Still tried before any 404.
EMPTY_MEMORY_S = 0.5


class Rotation:
    """The order in which a process's next claim of a project visits its shards: round robin
    from a random start (many workers spread over the shards from their first request), the
    shards that answered "nothing" within EMPTY_MEMORY_S moved to the end."""

    __slots__ = ("_next", "_empty")

    def __init__(self):
        self._next: dict[str, int] = {}
        self._empty: dict[str, dict[int, float]] = {}  # project -> shard -> when it was empty

    def start(self, project: str, count: int) -> int:
        current = self._next.get(project)
        if current is None:
            current = random.randrange(count)
        self._next[project] = (current + 1) % count
        return current % count

    def order(self, project: str, count: int, now: float) -> list[int]:
        """Every shard index, in the order to visit them at NOW (seconds, the engine's clock)."""
        start = self.start(project, count)
        ring = [(start + step) % count for step in range(count)]
        empty = self._empty.get(project)
        if not empty:
            return ring
        since = now - EMPTY_MEMORY_S
        recent = [index for index in ring if empty.get(index, since) > since]
        return [index for index in ring if index not in recent] + recent

    def answered(self, project: str, index: int, code: int, now: float) -> None:
        """Note shard INDEX's answer CODE to a claim at NOW (only "nothing" and its end matter)."""
        if code == scripts.claim.codes.NOTHING:
            if len(self._empty) > 10000:
                self._empty.clear()
            self._empty.setdefault(project, {})[index] = now
        elif code == scripts.claim.codes.OK:
            empty = self._empty.get(project)
            if empty:
                empty.pop(index, None)


def claim(
    layout: ShardLayout,
    start,
    wanted: int,
    visit: Callable[[ProjectKeys, int, str], tuple],
    answered: Callable[[int, int], None] | None = None,
) -> tuple[int, list, int | None]:
    """(code, items, first shard's settings age or None) of a claim of WANTED items over
    LAYOUT's shards, in the order START gives (a list of every index, or the index to go round
    from). VISIT(keys, wanted, mode) runs the claim script on one shard and returns its (code,
    settings age, items); MODE says how the visit counts the request. ANSWERED(index, code)
    hears each shard's answer."""
    items: list = []
    limited = False
    age0 = None
    unreachable = None  # a shard's ConnectionLost, raised if no other shard serves the claim
    count = layout.count
    order = start if isinstance(start, list) else [(start + step) % count for step in range(count)]
    for step, index in enumerate(order):
        # How this visit counts the request's one outcome (claim-21.lua, ARGV[9]).
        mode = "after" if items else ("more" if step < count - 1 else "")
        try:
            code, age, got = visit(layout.keys[index], wanted - len(items), mode)
        except ConnectionLost as exc:  # nothing reached that shard (failing over): the next one
            unreachable = exc
            continue
        except RedisError:
            # The call may have run (its items then wait for their reclaim): what earlier shards
            # gave is still handed out, rather than kept out by a 503.
            if items:
                break
            raise
        if answered is not None:
            answered(index, code)
        if index == 0:
            age0 = age
        if code == scripts.claim.codes.OK:
            items.extend(got)
            if len(items) >= wanted:
                break
        elif code == scripts.claim.codes.RATE_LIMITED:
            limited = True
        elif code in _FINAL:
            if not items:
                return code, items, age0
            break
    if items:
        return scripts.claim.codes.OK, items, age0
    if unreachable is not None:  # not a 404: the shard out of reach may hold items (a 503)
        raise unreachable
    return (scripts.claim.codes.RATE_LIMITED if limited else scripts.claim.codes.NOTHING), items, age0


def share_bytes(domain_bytes: list, part: int, before: int, total: int) -> list:
    """DOMAIN_BYTES (domain, bytes, ... flat) as the share of names BEFORE..BEFORE+PART of
    TOTAL: each domain's bytes cut at whole-number marks, so the shares add up exactly."""
    shared: list = []
    for i in range(0, len(domain_bytes), 2):
        reported = int(domain_bytes[i + 1])
        cut = reported * (before + part) // total - reported * before // total
        shared += (domain_bytes[i], cut)
    return shared


def done(
    layout: ShardLayout,
    items: list,
    domain_bytes: list,
    call: Callable[[ProjectKeys, list, list], DoneReply],
    groups: dict[int, list] | None = None,
) -> tuple[DoneReply, int | None]:
    """(reply, the first shard's settings age or None) of the done of ITEMS split by shard:
    CALL(keys, names, domain bytes) per shard (GROUPS: the names by shard, when located), the
    counts of the replies summed."""
    groups = layout.split(items) if groups is None else groups
    total = len(items)
    replies = {}
    before = 0
    for index in sorted(groups):
        names = groups[index]
        replies[index] = call(layout.keys[index], names, share_bytes(domain_bytes, len(names), before, total))
        before += len(names)
    if not replies:
        replies[0] = call(layout.keys[0], [], domain_bytes)
    age0 = replies[0].settings_age if 0 in replies else None
    first = next(iter(replies.values()))
    unknown = [r for r in replies.values() if r.code == scripts.done.codes.UNKNOWN_PROJECT]
    if unknown:
        return unknown[0], age0
    merged = DoneReply(
        first.code,
        first.settings_age,
        sum(r.new for r in replies.values()),
        sum(r.repeated for r in replies.values()),
        sum(r.unknown for r in replies.values()),
        sum(r.refused for r in replies.values()),
        max(r.clamped for r in replies.values()),
    )
    return merged, age0


def _pipeline(conn, commands: list) -> list:
    """COMMANDS' replies in one round trip on the hot path's connection (a list pipeline) or an
    admin's redis-py client."""
    if type(conn).__module__.startswith("redis"):
        pipe = conn.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute()
    return conn.pipeline(commands)


def holding(conn, layout: ShardLayout, names, probe: Callable[[ProjectKeys, str], tuple]) -> dict[int, list]:
    """NAMES grouped by the shard that holds each (no empty groups): on a project that gained
    shards (docs/sharding.md, "Adding shards") the first of a name's candidate shards where
    PROBE(keys, name), a Redis command answering 1 or 0, finds it (every probe in one round
    trip), else the shard it is added to today; for any other project, LAYOUT.split (no call)."""
    if not layout.grown:
        return layout.split(names)
    where = found_at(conn, layout, names, probe)
    groups: dict[int, list] = {}
    for name in names:
        groups.setdefault(where.get(name, layout.shard_of(name)), []).append(name)
    return groups


def found_at(conn, layout: ShardLayout, names, probe: Callable[[ProjectKeys, str], tuple]) -> dict:
    """NAME -> the first of its candidate shards where PROBE finds it, for the NAMES some
    candidate holds (every probe in one round trip; LAYOUT a grown project's)."""
    asked = [(name, index) for name in names for index in layout.candidates(name)]
    where: dict = {}
    replies = _pipeline(conn, [probe(layout.keys[index], name) for name, index in asked])
    for (name, index), found in zip(asked, replies):
        if found:
            where.setdefault(name, index)
    return where


def locate(conn, layout: ShardLayout, names) -> dict[int, list]:
    """NAMES grouped by the shard each is claimed on (dones, releases, burials)."""
    return holding(conn, layout, names, lambda k, name: ("HEXISTS", k.claims, name))


def lookup(conn, layout: ShardLayout, name: str, owners: item_status.Owners) -> tuple[int, dict | None]:
    """(shard, item_status.lookup's answer) of NAME: the shard it is added to today, or on a
    project that gained shards the first candidate where it is found (else the first)."""
    nowhere: tuple[int, dict | None] | None = None
    for index in layout.candidates(name) if layout.grown else [layout.shard_of(name)]:
        place = item_status.lookup(conn, layout.keys[index], name, owners)
        if place is None or place["status"] is not None:
            return index, place
        nowhere = nowhere or (index, place)
    assert nowhere is not None  # a name has at least one candidate shard
    return nowhere


def seen_on_earlier_shards(conn, layout: ShardLayout, names: list) -> set:
    """Those of NAMES the Bloom filter of an earlier shard of theirs has seen: a project that
    gained shards deduplicates a name against where it was added before too (read only)."""
    return set(first_seen_earlier(conn, layout, names))


def first_seen_earlier(conn, layout: ShardLayout, names: list) -> dict:
    """NAME -> the first of its earlier candidate shards whose Bloom filter has seen it, for
    those of NAMES one has (read only; nothing on a project never grown)."""
    if not layout.grown:
        return {}
    asked: dict[int, list] = {}
    for name in names:
        for older in layout.candidates(name)[1:]:
            asked.setdefault(older, []).append(name)
    seen_at: dict[int, set] = {}
    for index, group in asked.items():
        k = layout.keys[index]
        fields = conn.hgetall(k.bloom)
        if not fields:
            continue
        commands, answer = bloom_membership.membership(
            bloom.Plan(k, bloom.Geometry.from_redis(fields)), group
        )
        seen_at[index] = {name for name, found in zip(group, answer(_pipeline(conn, commands))) if found}
    first: dict = {}
    for name in names:
        for older in layout.candidates(name)[1:]:
            if name in seen_at.get(older, ()):
                first[name] = older
                break
    return first
