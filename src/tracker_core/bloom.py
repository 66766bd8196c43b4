"""A project's Bloom filter in Redis: geometry, growth, and the batch add that dedups items.

Every way an item enters a project (backfeed, ``tracker items add``, the admin API) goes through
``BloomFilter.add``: the hashing runs here (compiled, or the pure twin when TRACKER_PURE_PYTHON=1)
and one script tests and sets the bits and queues the new items.

Geometry: the first layer holds ``capacity`` items at a rate a little under the target
(``fp_rate * (1 - tightening)``), k = bits-per-item * ln 2 (optimal). When a layer is full the
filter adds one ``growth`` times larger whose rate is ``tightening`` times tighter, so the sum of
all layers' rates (the rate an absent item sees) stays under ``fp_rate``. Each layer is split into
equal chunks of at most ``chunk_bits`` bits, one Redis string each, so the 512 MB string limit
never caps a project; an item's bits all live in one chunk, chosen by its hash.

Two kinds share that layout, the hashing and the script; they differ in k. A ``layered``
filter (the default, and every filter made before kinds existed) spends the fewest bits: the
optimal k, 20 at 1e-6 (29 bits per item). A ``wide`` filter gives each layer at least
``bits_per_item`` bits per item (35) and the smallest k that still meets the layer's rate (10
at 0.9e-6): the script's work grows with k (each bit is one BITFIELD op), memory with the bits.
docs/data-model.md has the maths and the measured figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracker_core import keys as keyspace
from tracker_core import reply_codes as codes
from tracker_core import script_calls, twins

_impl, COMPILED = twins.load("bloom")
script_args = _impl.script_args

DEFAULT_CAPACITY = 1_000_000
DEFAULT_FP_RATE = 1e-6
DEFAULT_GROWTH = 2
DEFAULT_TIGHTENING = 0.1
LAYERED, WIDE = "layered", "wide"
KINDS = (LAYERED, WIDE)
# For new filters. Wide costs Redis less than half as much per new item but not the 5 µs issue 16
# asks for (docs/data-model.md); a stored geometry without a kind is LAYERED.
DEFAULT_KIND = LAYERED
WIDE_BITS_PER_ITEM = 35
MAX_CHUNK_BITS = 2**30  # 128 MiB per Redis string, far under the 512 MB limit
BATCH = 400
FIXED_KEYS = script_calls.BLOOM_FIXED_KEYS  # keys of bloom_add before the bitmaps

# The outcomes of BloomFilter.add (its callers' names for reply_codes.BloomAdd).
OK, UNKNOWN_PROJECT, WRONG_SECRET, FULL = (
    codes.BloomAdd.OK,
    codes.BloomAdd.UNKNOWN_PROJECT,
    codes.BloomAdd.WRONG_SECRET,
    codes.BloomAdd.FULL,
)


def optimal_bits_per_item(fp_rate: float) -> float:
    """Bits per item a Bloom filter with the best k needs for FP_RATE: -ln(p) / ln(2)^2."""
    return -math.log(fp_rate) / math.log(2) ** 2


def expected_rate(bits_per_item: float, k: int) -> float:
    """False-positive rate of a full filter: (1 - e^(-k / bits_per_item))^k."""
    return (1 - math.exp(-k / bits_per_item)) ** k


def fewest_bits_k(bits_per_item: float, fp_rate: float) -> int:
    """The smallest k whose expected rate at BITS_PER_ITEM meets FP_RATE (the optimal k, that
    is the lowest rate, when none does: the caller sized the bits so that one does)."""
    best = max(1, round(bits_per_item * math.log(2)))
    for k in range(1, best):
        if expected_rate(bits_per_item, k) <= fp_rate:
            return k
    return best


@dataclass(frozen=True)
class Layer:
    index: int
    capacity: int
    fp_rate: float
    k: int
    chunks: int
    chunk_bits: int

    @property
    def bits(self) -> int:
        return self.chunks * self.chunk_bits


@dataclass(frozen=True)
class Geometry:
    capacity: int = DEFAULT_CAPACITY
    fp_rate: float = DEFAULT_FP_RATE
    growth: int = DEFAULT_GROWTH
    tightening: float = DEFAULT_TIGHTENING
    chunk_bits: int = MAX_CHUNK_BITS
    layers: int = 1
    kind: str = DEFAULT_KIND
    bits_per_item: int = WIDE_BITS_PER_ITEM  # the least a wide layer gets; unused when layered

    def __post_init__(self):
        if self.capacity < 1 or not 0 < self.fp_rate < 1 or self.growth < 1:
            raise ValueError("capacity >= 1, 0 < fp_rate < 1 and growth >= 1 are required")
        if not 0 < self.tightening < 1 or not 64 <= self.chunk_bits <= 2**32:
            raise ValueError("0 < tightening < 1 and 64 <= chunk_bits <= 2**32 are required")
        if self.kind not in KINDS or not 1 <= self.bits_per_item <= 256:
            raise ValueError(f"kind must be one of {KINDS} and 1 <= bits_per_item <= 256")

    @classmethod
    def from_redis(cls, fields: dict) -> Geometry:
        return cls(
            capacity=int(fields["capacity"]),
            fp_rate=float(fields["fp_rate"]),
            growth=int(fields["growth"]),
            tightening=float(fields["tightening"]),
            chunk_bits=int(fields["chunk_bits"]),
            layers=int(fields.get("layers", 1)),
            # Filters made before kinds existed are layered, and must stay so to keep answering.
            kind=fields.get("kind", LAYERED),
            bits_per_item=int(fields.get("bits_per_item", WIDE_BITS_PER_ITEM)),
        )

    def layer(self, index: int) -> Layer:
        capacity = self.capacity * self.growth**index
        fp_rate = self.fp_rate * (1 - self.tightening) * self.tightening**index
        per_item = optimal_bits_per_item(fp_rate)
        if self.kind == WIDE:
            per_item = max(per_item, self.bits_per_item)
        bits = math.ceil(capacity * per_item)
        chunks = math.ceil(bits / self.chunk_bits)
        chunk_bits = math.ceil(bits / chunks)
        if self.kind == WIDE:
            k = fewest_bits_k(chunk_bits * chunks / capacity, fp_rate)
        else:
            k = max(1, round(chunk_bits * chunks / capacity * math.log(2)))
        return Layer(index, capacity, fp_rate, k, chunks, chunk_bits)

    def all_layers(self) -> list[Layer]:
        return [self.layer(i) for i in range(self.layers)]

    def bits_total(self) -> int:
        return sum(layer.bits for layer in self.all_layers())


class Plan:
    """What one script call needs: the bitmap keys and, per layer, where its chunks start."""

    def __init__(self, keys: keyspace.ProjectKeys, geometry: Geometry):
        self.geometry = geometry
        self.layers = geometry.all_layers()
        self.chunk_keys: list[str] = []
        self.hash_plan: list[tuple] = []
        for layer in self.layers:
            first_key = FIXED_KEYS + 1 + len(self.chunk_keys)
            self.hash_plan.append((layer.index, layer.k, layer.chunks, layer.chunk_bits, first_key))
            self.chunk_keys.extend(keys.bloom_chunk(layer.index, c) for c in range(layer.chunks))
        self.ks = [layer.k for layer in self.layers]


def configure(
    conn, keys: keyspace.ProjectKeys, geometry: Geometry | None = None, replace: bool = False
) -> Geometry | int:
    """Fix the geometry (defaults when None); return the geometry in force, or an error code."""
    g = geometry or Geometry()
    fields = script_calls.bloom_configure(
        conn,
        keys,
        capacity=g.capacity,
        fp_rate=repr(g.fp_rate),
        growth=g.growth,
        tightening=repr(g.tightening),
        chunk_bits=g.chunk_bits,
        kind=g.kind,
        bits_per_item=g.bits_per_item,
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
                geometry = configure(self.conn, self.keys)
                if isinstance(geometry, int):
                    return None
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
        past BOUND (checked in the script, atomically).
        """
        k = self.keys
        dedup_keys = entries if dedup_keys is None else dedup_keys
        for _attempt in range(8):
            plan = self.plan()
            if plan is None:
                return AddResult(UNKNOWN_PROJECT)
            args = script_args(entries, dedup_keys, plan.hash_plan)
            last = plan.layers[-1]
            reply = script_calls.bloom_add(
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
                ks=plan.ks,
                hashed=args,
            )
            if reply.code != codes.BloomAdd.LAYERS_CHANGED:
                return AddResult(*reply)
            self.plan(reload=True)
        raise RuntimeError("the Bloom filter's geometry kept changing under this call")

    def contains_many(self, dedup_keys) -> list[bool]:
        """Tell for each key whether the filter has (probably) seen it; reads only, one round trip.

        CONN must be a RawRedis (its ``pipeline``); used by the tests and the benchmarks.
        """
        plan = self.plan()
        if plan is None or not dedup_keys:
            return [False] * len(dedup_keys)
        args = script_args([b""] * len(dedup_keys), dedup_keys, plan.hash_plan)
        commands, i = [], 0
        for _ in dedup_keys:
            i += 1  # the entry
            for k in plan.ks:
                chunk_key = plan.chunk_keys[args[i] - FIXED_KEYS - 1]
                ops = []
                for position in args[i + 1 : i + 1 + k]:
                    ops += ("GET", "u1", position)
                commands.append(("BITFIELD_RO", chunk_key, *ops))
                i += 1 + k
        replies = self.conn.pipeline(commands)
        layers = len(plan.ks)
        return [
            any(all(replies[n * layers + layer]) for layer in range(layers)) for n in range(len(dedup_keys))
        ]


def all_chunk_keys(r, keys: keyspace.ProjectKeys) -> list[str]:
    """Every bitmap key the project's filter may have (to delete a project without KEYS)."""
    fields = r.hgetall(keys.bloom)
    if not fields:
        return []
    return Plan(keys, Geometry.from_redis(fields)).chunk_keys
