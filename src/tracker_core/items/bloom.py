"""A project's Bloom filter in Redis: geometry, growth, and the batch add that dedups items.

Every way an item enters a project (backfeed, ``tracker items add``, the admin API) goes through
``BloomFilter.add``: the hashing runs in the caller's process (compiled, or the pure twin when
TRACKER_PURE_PYTHON=1) and one script tests and sets the bits and queues the new items.

Geometry: the first layer holds ``capacity`` items at a rate a little under the target
(``fp_rate * (1 - tightening)``), k = bits-per-item * ln 2 (optimal). When a layer is full the
filter adds one ``growth`` times larger whose rate is ``tightening`` times tighter, so the sum of
all layers' rates (the rate an absent item sees) stays under ``fp_rate``. Each layer is split into
equal chunks of at most ``chunk_bits`` bits, one Redis string each, so the 512 MB string limit
never caps a project; an item's bits all live in one chunk, chosen by its hash.

Kinds (stored with the geometry; a filter keeps its kind for life):

- ``layered`` (every filter made before kinds existed): Bloom layers with the optimal k, the
  fewest bits (20 at 1e-6, 29 bits per item).
- ``wide``: the same layers with at least ``bits_per_item`` bits per item (35) and the smallest
  k that meets each layer's rate (10 at 0.9e-6); each bit is a BITFIELD op in the script.
- ``fingerprint``: not bits but a few bytes of the name's hash in one of two buckets of 8
  slots (the emptier one takes it); 3-byte fingerprints at 35 bits per item give 6.6e-7. Items
  whose two buckets are both full go to a small set, the layer's stash. Its layers grow as the
  others'. New fingerprint filters are blocked (``block`` = BLOCK_BUCKETS, stored with the
  geometry): an item's two buckets are two distinct buckets of one block of 16, so one GETRANGE
  reads both (the span from the lower to the higher) and a new item costs it and one SETRANGE;
  two choices inside a block stash ~70 names in a million at capacity (STASH_SHARE leaves them
  room). A fingerprint filter stored without ``block`` keeps its independent pairs for life:
  two GETRANGEs per item and, when new, one SETRANGE (none stashed in a million).

Salt: each filter gets 16 random bytes when its geometry is first stored, which key its hash
(_bloom_py.keyed_hash), so that an anonymous poster can't compute which names share a future
name's positions (to have it dropped as seen) or crowd a bucket. It never leaves Redis and this
module (Geometry hides it from repr; the admin output and audit name only the geometry). A
geometry stored before salts has none and hashes as it always did.

docs/data-model.md has the maths and the measured figures.

This module owns the filter's calls (configure, BloomFilter.add); the geometry is
bloom_geometry.py, a call's keys and hashing bloom_plan.py, the read-only test bloom_membership.py.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from tracker_core import keyspace, scripts
from tracker_core.items.bloom_geometry import DEFAULT_KIND, FINGERPRINT, KINDS, LAYERED, WIDE, Geometry
from tracker_core.items.bloom_membership import membership
from tracker_core.items.bloom_plan import Plan
from tracker_core.scripts.backfeed_filter import BloomAddReply

# What callers use: the filter's calls, and the geometry they are given with its kinds.
__all__ = [
    "BATCH",
    "DEFAULT_KIND",
    "FINGERPRINT",
    "FULL",
    "KINDS",
    "LAYERED",
    "OK",
    "UNKNOWN_PROJECT",
    "WIDE",
    "WRONG_SECRET",
    "AddResult",
    "BloomFilter",
    "Geometry",
    "Plan",
    "all_chunk_keys",
    "configure",
]

BATCH = 400  # items per script call, which blocks Redis while it runs

# The outcomes of BloomFilter.add (its callers' names for scripts.bloom_add.codes).
OK, UNKNOWN_PROJECT, WRONG_SECRET, FULL = (
    scripts.bloom_add.codes.OK,
    scripts.bloom_add.codes.UNKNOWN_PROJECT,
    scripts.bloom_add.codes.WRONG_SECRET,
    scripts.bloom_add.codes.FULL,
)


def configure(
    conn, keys: keyspace.ProjectKeys, geometry: Geometry | None = None, replace: bool = False
) -> Geometry | int:
    """Fix the geometry (defaults when None); return the geometry in force, or an error code.

    A new salt goes with every call (GEOMETRY's when it has one: the tests' fixed ones); the script stores it only when it stores a geometry (a new
    filter, or an empty one replaced: nothing hashed with the old salt is left to find)."""
    g = geometry or Geometry()
    fields = scripts.bloom_configure(
        conn,
        keys,
        capacity=g.capacity,
        fp_rate=repr(g.fp_rate),
        growth=g.growth,
        tightening=repr(g.tightening),
        chunk_bits=g.chunk_bits,
        kind=g.kind,
        bits_per_item=g.bits_per_item,
        salt=g.salt or secrets.token_hex(16),
        block=g.block,
        replace=replace,
    )
    if isinstance(fields, int):
        return fields
    return Geometry.from_redis(fields)


@dataclass
class AddResult:
    status: int
    new: int = 0
    seen: int = 0


class BloomFilter:
    """The filter of one project, seen from one process; caches the geometry until it changes."""

    def __init__(self, conn, keys: keyspace.ProjectKeys):
        self.conn = conn
        self.keys = keys
        self._plan: Plan | None = None

    def plan(self, reload: bool = False) -> Plan | None:
        if self._plan is None or reload:
            fields = self.conn.hgetall(self.keys.bloom)
            if fields:
                geometry = Geometry.from_redis(fields)
            else:
                configured = configure(self.conn, self.keys)
                if isinstance(configured, int):
                    return None
                geometry = configured
            self._plan = Plan(self.keys, geometry)
        return self._plan

    def add(
        self,
        entries,
        dedup_keys=None,
        target: str | None = None,
        owner: str = "",
        secret_digest: str = "",
        shard: str = "",
        fields: tuple[str, str] = ("items_added", "items_duplicate"),
        bound: int = 0,
        counted: str | None = None,
    ) -> AddResult:
        """Queue the ENTRIES whose DEDUP_KEYS the filter has not seen, in one script call.

        The caller keeps batches to a few hundred items (one script blocks Redis while it runs).
        With BOUND > 0, the call changes nothing and answers FULL when its new items would take
        the target, the set COUNTED (default: the held items' way-in set) and the held items
        past BOUND (checked in the script, atomically, on the whole batch). A batch whose new
        items would pass the last layer's capacity goes in two calls (the first fills the
        layer); only when another writer fills the queue between them can the second be refused
        after the first went in: its items stay queued (counted in NEW) and come back as seen
        when the caller retries.
        """
        dedup_keys = entries if dedup_keys is None else dedup_keys
        call: dict[str, Any] = dict(target=target, owner=owner, secret_digest=secret_digest, shard=shard)
        call.update(fields=fields, bound=bound, counted=counted)
        # A loop, not recursion: a filter of tiny layers may split a batch hundreds of times.
        # Each SPLIT's cut is at least 1 and short of its part, so the parts shrink to an end.
        new = seen = 0
        parts = [(entries, dedup_keys)]
        while parts:
            part, part_keys = parts.pop()
            reply = self._add_once(part, part_keys, **call)
            if reply.code == scripts.bloom_add.codes.SPLIT:
                # The first CUT items fill the last layer, which then grows; the rest follows.
                cut = reply.new
                parts += [(part[cut:], part_keys[cut:]), (part[:cut], part_keys[:cut])]
                continue
            new, seen = new + reply.new, seen + reply.seen
            if reply.code != OK:
                return AddResult(reply.code, new, seen)
        return AddResult(OK, new, seen)

    def _add_once(self, entries, dedup_keys, *, target, owner, secret_digest, shard, fields, bound, counted):
        """One bloom_add call over the plan in force (replanned while the layers change)."""
        k = self.keys
        for _attempt in range(8):
            plan = self.plan()
            if plan is None:
                return BloomAddReply(UNKNOWN_PROJECT, 0, 0)
            args = plan.args(entries, dedup_keys)
            last = plan.layers[-1]
            reply = scripts.bloom_add(
                self.conn,
                k,
                chunk_keys=plan.chunk_keys,
                target=target or k.backfeed,
                counted=counted or k.limited_in,
                layers=len(plan.layers),
                last_capacity=last.capacity,
                owner=owner,
                secret_digest=secret_digest,
                shard=shard,
                new_field=fields[0],
                seen_field=fields[1],
                count=len(entries),
                bound=bound,
                kind=plan.geometry.planned_kind,
                ks=plan.ks,
                hashed=args,
            )
            if reply.code != scripts.bloom_add.codes.LAYERS_CHANGED:
                return reply
            self.plan(reload=True)
        raise RuntimeError("the Bloom filter's geometry kept changing under this call")

    def contains_many(self, dedup_keys) -> list[bool]:
        """Tell for each key whether the filter has (probably) seen it; reads only, one round trip.

        CONN must be a RawRedis (its ``pipeline``); used by the tests and the benchmarks.
        """
        plan = self.plan()
        if plan is None or not dedup_keys:
            return [False] * len(dedup_keys)
        commands, answer = membership(plan, dedup_keys)
        return answer(self.conn.pipeline(commands))


def all_chunk_keys(r, keys: keyspace.ProjectKeys) -> list[str]:
    """Every bitmap key the project's filter may have (to delete a project without KEYS)."""
    fields = r.hgetall(keys.bloom)
    if not fields:
        return []
    return Plan(keys, Geometry.from_redis(fields)).chunk_keys
