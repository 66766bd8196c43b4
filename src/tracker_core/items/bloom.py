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
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from tracker_core import keyspace, scripts
from tracker_core.compiled import twins
from tracker_core.infra.connection import ENCODING, ENCODING_ERRORS

_impl, COMPILED = twins.load("bloom")
script_args = _impl.script_args
fingerprint_args = _impl.fingerprint_args
block_args = _impl.block_args

DEFAULT_CAPACITY = 1_000_000
DEFAULT_FP_RATE = 1e-6
DEFAULT_GROWTH = 2
DEFAULT_TIGHTENING = 0.1
LAYERED, WIDE, FINGERPRINT = "layered", "wide", "fingerprint"
KINDS = (LAYERED, WIDE, FINGERPRINT)
# For new filters; a stored geometry without a kind is LAYERED.
DEFAULT_KIND = LAYERED
WIDE_BITS_PER_ITEM = 35
BUCKET_SLOTS = 8  # a fingerprint bucket: 24 bytes at 3-byte fingerprints
BLOCK_BUCKETS = 16  # a new fingerprint filter's block: an item's two buckets are two of its 16
# A blocked layer leaves this share of its table's bytes to its stash (two choices inside a block
# stash ~70 names in a million at capacity, ~5 KB in Redis), so the two stay within 35 bits/item.
STASH_SHARE = 0.002
# How full a fingerprint layer's buckets are at its capacity: 3-byte fingerprints at 35 bits per
# item. With two choices no bucket pair overflowed filling a million items (docs/data-model.md).
FINGERPRINT_LOAD = 24 / 35
# A layer's rate never goes under this: with growth 1 the tightened rate reaches 0.0 after ~300
# layers and log(0) raises (the layer is then merely sized for 1e-300; it stays far under 1e-6).
MIN_LAYER_RATE = 1e-300
SALT_RE = re.compile(r"(?:[0-9a-f]{32})?\Z")  # 16 bytes as hex; '' in filters made before salts
MAX_CHUNK_BITS = 2**30  # 128 MiB per Redis string, far under the 512 MB limit
BATCH = 400
FIXED_KEYS = len(scripts.bloom_add.key_slots)  # keys of bloom_add before the bitmaps

# The outcomes of BloomFilter.add (its callers' names for scripts.bloom_add.codes).
OK, UNKNOWN_PROJECT, WRONG_SECRET, FULL = (
    scripts.bloom_add.codes.OK,
    scripts.bloom_add.codes.UNKNOWN_PROJECT,
    scripts.bloom_add.codes.WRONG_SECRET,
    scripts.bloom_add.codes.FULL,
)


def optimal_bits_per_item(fp_rate: float) -> float:
    """Bits per item a Bloom filter with the best k needs for FP_RATE: -ln(p) / ln(2)^2."""
    return -math.log(fp_rate) / math.log(2) ** 2


def expected_rate(bits_per_item: float, k: int) -> float:
    """False-positive rate of a full filter: (1 - e^(-k / bits_per_item))^k."""
    return (1 - math.exp(-k / bits_per_item)) ** k


def fingerprint_rate(slot_bytes: int, load: float = FINGERPRINT_LOAD) -> float:
    """False-positive rate of a fingerprint layer whose buckets are LOAD full: an absent name
    meets 2 x BUCKET_SLOTS x LOAD fingerprints on average, each equal to its own with
    probability one in the count of fingerprints (both end bytes are never 0)."""
    values = 255 if slot_bytes == 1 else 255**2 * 256 ** (slot_bytes - 2)
    return 2 * BUCKET_SLOTS * load / values


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
    k: int  # bits set per item; 0 in a fingerprint layer
    chunks: int
    chunk_bits: int
    slot_bytes: int = 0  # a fingerprint layer's fingerprint size
    buckets: int = 0  # a fingerprint layer's buckets per chunk
    block: int = 0  # a blocked fingerprint layer's buckets per block; 0: independent pairs

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
    # The hash key, secret (kept out of repr, so out of logs); '' hashes as before salts.
    salt: str = field(default="", repr=False)
    # A fingerprint filter's buckets per block (None: BLOCK_BUCKETS for a new fingerprint filter);
    # 0: independent pairs (every fingerprint filter stored without it), always 0 for the others.
    block: int | None = None

    def __post_init__(self):
        if self.block is None:
            object.__setattr__(self, "block", BLOCK_BUCKETS if self.kind == FINGERPRINT else 0)
        if self.kind != FINGERPRINT and self.block:
            raise ValueError("only a fingerprint filter has blocks")
        if self.block and not 2 <= self.block <= 256:
            raise ValueError("a block holds 2 to 256 buckets")
        if self.capacity < 1 or not 0 < self.fp_rate < 1 or self.growth < 1:
            raise ValueError("capacity >= 1, 0 < fp_rate < 1 and growth >= 1 are required")
        if not 0 < self.tightening < 1 or not 64 <= self.chunk_bits <= 2**32:
            raise ValueError("0 < tightening < 1 and 64 <= chunk_bits <= 2**32 are required")
        if self.kind not in KINDS or not 1 <= self.bits_per_item <= 256:
            raise ValueError(f"kind must be one of {KINDS} and 1 <= bits_per_item <= 256")
        if not SALT_RE.match(self.salt):
            raise ValueError("salt must be 32 lowercase hex digits, or empty")

    @property
    def salt_words(self) -> tuple[int, int]:
        """The salt as the hash takes it: (s0, s1), (0, 0) when there is none."""
        if not self.salt:
            return (0, 0)
        return int(self.salt[:16], 16), int(self.salt[16:], 16)

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
            # Filters made before salts hash unkeyed, and must stay so to keep answering.
            salt=fields.get("salt", ""),
            # Fingerprint filters made before blocks have independent pairs, and keep them.
            block=int(fields.get("block", 0)),
        )

    @property
    def planned_kind(self) -> str:
        """The kind as bloom_add checks it against the stored one: 'fingerprint:16' when blocked."""
        return f"{self.kind}:{self.block}" if self.block else self.kind

    def layer(self, index: int) -> Layer:
        capacity = self.capacity * self.growth**index
        fp_rate = max(MIN_LAYER_RATE, self.fp_rate * (1 - self.tightening) * self.tightening**index)
        if self.kind == FINGERPRINT:
            return self._fingerprint_layer(index, capacity, fp_rate)
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

    def _fingerprint_layer(self, index: int, capacity: int, fp_rate: float) -> Layer:
        """The smallest fingerprint that meets FP_RATE; buckets FINGERPRINT_LOAD full at CAPACITY;
        chunks of whole buckets."""
        slot_bytes = next((b for b in range(1, 9) if fingerprint_rate(b) <= fp_rate), 8)
        bucket_bytes = slot_bytes * BUCKET_SLOTS
        # Rounded down, so the bits per item never pass the design's (the load passes it by a hair).
        total = max(1, math.floor(capacity / (BUCKET_SLOTS * FINGERPRINT_LOAD)))
        if self.block:
            # Whole blocks: in all, and in each chunk (one block at least, whatever chunk_bits).
            block = self.block
            blocks = max(1, math.floor(total * (1 - STASH_SHARE)) // block)
            chunks = math.ceil(blocks / max(1, self.chunk_bits // (8 * bucket_bytes * block)))
            buckets = max(1, blocks // chunks) * block
            return Layer(
                index, capacity, fp_rate, 0, chunks, buckets * bucket_bytes * 8, slot_bytes, buckets, block
            )
        chunks = math.ceil(total / max(1, self.chunk_bits // (8 * bucket_bytes)))
        buckets = max(1, total // chunks)
        return Layer(index, capacity, fp_rate, 0, chunks, buckets * bucket_bytes * 8, slot_bytes, buckets)

    def all_layers(self) -> list[Layer]:
        return [self.layer(i) for i in range(self.layers)]

    def bits_total(self) -> int:
        return sum(layer.bits for layer in self.all_layers())


class Plan:
    """What one script call needs: the bitmap keys (then a fingerprint filter's stashes, one per
    layer) and, per layer, where its chunks start."""

    def __init__(self, keys: keyspace.ProjectKeys, geometry: Geometry):
        self.geometry = geometry
        self.fingerprints = geometry.kind == FINGERPRINT
        self.layers = geometry.all_layers()
        self.chunk_keys: list[str] = []
        self.hash_plan: list[tuple] = []
        self.blocked = self.fingerprints and bool(geometry.block)
        for layer in self.layers:
            first_key = FIXED_KEYS + 1 + len(self.chunk_keys)
            if self.blocked:
                self.hash_plan.append(
                    (
                        layer.index,
                        layer.slot_bytes,
                        BUCKET_SLOTS,
                        layer.chunks,
                        layer.buckets,
                        first_key,
                        layer.block,
                    )
                )
            elif self.fingerprints:
                self.hash_plan.append(
                    (layer.index, layer.slot_bytes, BUCKET_SLOTS, layer.chunks, layer.buckets, first_key)
                )
            else:
                self.hash_plan.append((layer.index, layer.k, layer.chunks, layer.chunk_bits, first_key))
            self.chunk_keys.extend(keys.bloom_chunk(layer.index, c) for c in range(layer.chunks))
        if self.fingerprints:
            self.chunk_keys.extend(keys.bloom_stash(layer.index) for layer in self.layers)
        # What the script is told per layer: bits per item, or a fingerprint's bytes.
        self.ks = [layer.slot_bytes if self.fingerprints else layer.k for layer in self.layers]
        self.script_kind = "fingerprint" if self.fingerprints else "bits"
        self.salt = geometry.salt_words

    def hashed(self, entries, dedup_keys, hash_plan=None) -> list:
        """The per-item hashed ARGV for this plan's kind and salt (over HASH_PLAN's layers, all by
        default)."""
        layers = self.hash_plan if hash_plan is None else hash_plan
        if self.blocked:
            return block_args(entries, dedup_keys, layers, self.salt)
        if self.fingerprints:
            return fingerprint_args(entries, dedup_keys, layers, self.salt)
        return script_args(entries, dedup_keys, layers, self.salt)

    def args(self, entries, dedup_keys) -> list:
        """The per-item ARGV of bloom_add for this plan's kind."""
        return self.hashed(entries, dedup_keys)


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
        past BOUND (checked in the script, atomically, on the whole batch). A batch whose new
        items would pass the last layer's capacity goes in two calls (the first fills the
        layer); only when another writer fills the queue between them can the second be refused
        after the first went in: its items stay queued (counted in NEW) and come back as seen
        when the caller retries.
        """
        dedup_keys = entries if dedup_keys is None else dedup_keys
        call = dict(target=target, owner=owner, secret_digest=secret_digest, shard=shard)
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
                return scripts.bloom_add.Reply(UNKNOWN_PROJECT, 0, 0)
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


def membership(plan: Plan, dedup_keys) -> tuple[list[tuple], Callable[[list], list[bool]]]:
    """The read-only commands that tell whether the filter holds each of DEDUP_KEYS, and the
    function that reads their replies (in order; GETRANGE's as bytes, or as str decoded with
    surrogateescape) into one answer per key: the same test as bloom_add's."""
    layers = len(plan.layers)
    if plan.blocked:
        return _block_membership(plan, dedup_keys)
    if plan.fingerprints:
        return _fingerprint_membership(plan, dedup_keys)
    args = plan.hashed([b""] * len(dedup_keys), dedup_keys)
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

    def answer(replies: list) -> list[bool]:
        return [
            any(all(replies[n * layers + layer]) for layer in range(layers)) for n in range(len(dedup_keys))
        ]

    return commands, answer


def seen_by(conn, keys: keyspace.ProjectKeys, dedup_keys) -> list[bool]:
    """Whether the project's filter has (probably) seen each of DEDUP_KEYS; reads only, one round
    trip, any kind. CONN is a redis-py client (the admin's). A filter never configured has seen
    nothing (and is not configured here: a read must not write)."""
    fields = conn.hgetall(keys.bloom)
    if not fields or not dedup_keys:
        return [False] * len(dedup_keys)
    commands, answer = membership(Plan(keys, Geometry.from_redis(fields)), dedup_keys)
    pipe = conn.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return answer(pipe.execute())


def _raw(reply) -> bytes:
    """A GETRANGE reply as bytes (RawRedis decodes replies to str with surrogateescape)."""
    return reply.encode(ENCODING, ENCODING_ERRORS) if isinstance(reply, str) else bytes(reply)


def _holds(bucket: bytes, fingerprint: bytes) -> bool:
    size = len(fingerprint)
    return any(bucket[at : at + size] == fingerprint for at in range(0, len(bucket), size))


def _full(bucket: bytes, slot_bytes: int) -> bool:
    """No empty slot: the bucket was read whole (a bitmap shorter than it is zeros past its
    end) and holds no all-zero slot."""
    return len(bucket) == slot_bytes * BUCKET_SLOTS and not _holds(bucket, bytes(slot_bytes))


def _fingerprint_membership(plan: Plan, dedup_keys):
    """membership for a fingerprint filter: per layer its two buckets and its stash, which
    counts only where both buckets are full (as bloom_add looks)."""
    layers, per_layer = len(plan.layers), 6
    args = plan.hashed([b""] * len(dedup_keys), dedup_keys)
    commands, fingerprints = [], []
    for i in range(0, len(args), 1 + per_layer * layers):
        for layer in range(layers):
            at = i + 1 + layer * per_layer
            chunk_index, s1, e1, s2, e2, fingerprint = args[at : at + per_layer]
            chunk = plan.chunk_keys[chunk_index - FIXED_KEYS - 1]
            stash = plan.chunk_keys[len(plan.chunk_keys) - layers + layer]
            member = b"%d %d " % (s1, s2) + fingerprint
            commands += [
                ("GETRANGE", chunk, s1, e1),
                ("GETRANGE", chunk, s2, e2),
                ("SISMEMBER", stash, member),
            ]
            fingerprints.append(fingerprint)

    def answer(replies: list) -> list[bool]:
        seen = []
        for n in range(len(dedup_keys)):
            found = False
            for layer in range(layers):
                at = n * layers + layer
                first, second = _raw(replies[3 * at]), _raw(replies[3 * at + 1])
                fingerprint, size = fingerprints[at], plan.layers[layer].slot_bytes
                found = found or _holds(first, fingerprint) or _holds(second, fingerprint)
                if not found and _full(first, size) and _full(second, size):
                    found = bool(replies[3 * at + 2])
            seen.append(found)
        return seen

    return commands, answer


def _block_membership(plan: Plan, dedup_keys):
    """membership for a blocked fingerprint filter: per layer one GETRANGE from its lower
    bucket to its higher one, and its stash, which counts only where both are full."""
    layers, per_layer = len(plan.layers), 4
    args = plan.hashed([b""] * len(dedup_keys), dedup_keys)
    commands, looks = [], []
    for i in range(0, len(args), 1 + per_layer * layers):
        for layer in range(layers):
            at = i + 1 + layer * per_layer
            low, high, fingerprint, info = args[at : at + per_layer]
            chunk = plan.chunk_keys[(info[1] << 16 | info[2] << 8 | info[3]) - FIXED_KEYS - 1]
            stash = plan.chunk_keys[len(plan.chunk_keys) - layers + layer]
            commands += [
                ("GETRANGE", chunk, low, high),
                ("SISMEMBER", stash, b"%d %d " % (low, high) + fingerprint),
            ]
            looks.append((fingerprint, high - low + 1))

    def answer(replies: list) -> list[bool]:
        seen = []
        for n in range(len(dedup_keys)):
            found = False
            for layer in range(layers):
                at = n * layers + layer
                fingerprint, span = looks[at]
                size = len(fingerprint)
                bucket = size * BUCKET_SLOTS
                # Zeros past the bitmap's end are empty slots.
                both = _raw(replies[2 * at]).ljust(span, b"\0")
                low, high = both[:bucket], both[span - bucket :]
                found = found or _holds(low, fingerprint) or _holds(high, fingerprint)
                if not found and not _holds(low, bytes(size)) and not _holds(high, bytes(size)):
                    found = bool(replies[2 * at + 1])
            seen.append(found)
        return seen

    return commands, answer


def all_chunk_keys(r, keys: keyspace.ProjectKeys) -> list[str]:
    """Every bitmap key the project's filter may have (to delete a project without KEYS)."""
    fields = r.hgetall(keys.bloom)
    if not fields:
        return []
    return Plan(keys, Geometry.from_redis(fields)).chunk_keys
