"""A Bloom filter's geometry: its layers, their sizes and rates, and its kind; pure arithmetic.

Owns Geometry (what is stored in the project's ``bloom`` hash) and Layer (what one layer of it
needs: capacity, rate, bits per item or fingerprint size, chunks). bloom.py's docstring tells the
kinds, the growth and the salt; docs/data-model.md has the maths and the measured figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

DEFAULT_CAPACITY = 1_000_000
# What an admin may ask of a filter (tracker_core.admin.backfeed_verbs.bloom_filter): a capacity of
# at most a billion names, and a first layer of at most 4 GiB of Redis memory over all shards
# (a capacity of 10**30 was taken, and the first name added made Redis allocate gigabytes).
MAX_CAPACITY = 1_000_000_000
MAX_FIRST_LAYER_BYTES = 4 * 2**30
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


def rate_at(kind: str, k: int, bits: int, slot_bytes: int, items: int) -> float:
    """Expected false-positive rate of one layer of BITS holding ITEMS: (1 - e^(-k n / m))^k for
    the bit kinds, fingerprint_rate at its slots' load for a fingerprint layer; 0 while empty."""
    if items <= 0 or bits <= 0:
        return 0.0
    if kind == FINGERPRINT:
        return fingerprint_rate(slot_bytes, items * slot_bytes * 8 / bits)
    return expected_rate(bits / items, k)
