"""Bloom-filter hashing for a batch, in pure Python: the readable twin of _bloom_c.pyx.

Both build the same flat argument list for the backfeed script, bit for bit (property tests
compare them). An item's dedup key is hashed once with 64-bit FNV-1a; each filter layer then
derives its own chunk and k bit positions from that hash with the murmur3 finalizer (different
seeds per layer, so layers are independent) and double hashing: position i = (a + i*b) mod bits.
A fingerprint filter's layers (fingerprint_args) take from the same two finalizer outputs the
chunk, two independent buckets and a fingerprint of a few bytes; in a blocked fingerprint layer
(block_args) its two buckets are two distinct ones of one block of BLOCK buckets, so that one
GETRANGE reads both.

SALT, the filter's secret (s0, s1), keys the hash so that a poster can't compute in advance which
names share positions (to poison a future name, or crowd a bucket): FNV-1a starts from the offset
basis xor s0 and its result is xor'ed with s1. A filter stored without a salt has (0, 0), which
hashes exactly as before salts existed.
"""

from __future__ import annotations

MASK64 = 0xFFFFFFFFFFFFFFFF
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
SEED_A = 0x9E3779B97F4A7C15
SEED_B = 0xC2B2AE3D27D4EB4F
SEED_C = 0x165667B19E3779F9


def _as_bytes(key) -> bytes:
    return key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)


def fnv1a64(data: bytes) -> int:
    """Hash DATA with 64-bit FNV-1a."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h


def keyed_hash(data: bytes, salt=(0, 0)) -> int:
    """FNV-1a of DATA keyed with SALT (s0, s1): a keyed start and a keyed end."""
    h = FNV_OFFSET ^ salt[0]
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h ^ salt[1]


def fmix64(h: int) -> int:
    """Mix all bits of H (murmur3's finalizer), so every output bit depends on every input bit."""
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK64
    h ^= h >> 33
    return h


def layer_positions(fingerprint: int, seed: int, k: int, chunks: int, chunk_bits: int):
    """Return (chunk, [k bit positions]) of a hashed key in one layer."""
    salt = (seed + 1) & MASK64
    a = fmix64(fingerprint ^ ((SEED_A * salt) & MASK64))
    b = fmix64(fingerprint ^ ((SEED_B * salt) & MASK64))
    chunk = fmix64(a ^ SEED_C) % chunks
    return chunk, [((a + i * b) & MASK64) % chunk_bits for i in range(k)]


def script_args(entries, dedup_keys, layers, salt=(0, 0)) -> list:
    """Build the per-item ARGV of the backfeed script for a batch.

    ENTRIES are what gets queued, DEDUP_KEYS (same length) what the filter keys on; LAYERS is a
    sequence of (seed, k, chunks, chunk_bits, first_key_index), SALT the filter's (s0, s1). For each item the list holds the
    entry, then per layer the 1-based KEYS index of its chunk and its k bit positions.
    """
    out: list = []
    for entry, key in zip(entries, dedup_keys):
        fingerprint = keyed_hash(_as_bytes(key), salt)
        out.append(entry)
        for seed, k, chunks, chunk_bits, first_key in layers:
            chunk, positions = layer_positions(fingerprint, seed, k, chunks, chunk_bits)
            out.append(first_key + chunk)
            out.extend(positions)
    return out


def fingerprint(h: int, slot_bytes: int) -> bytes:
    """SLOT_BYTES bytes of H whose first and last are never 0: an empty slot is all zeros, and
    with both ends of every stored fingerprint non-zero, the first run of SLOT_BYTES zeros in a
    bucket starts exactly at its first empty slot."""
    if not 1 <= slot_bytes <= 8:
        raise ValueError("slot_bytes must be 1 to 8")
    raw = [(h >> (8 * i)) & 0xFF for i in range(slot_bytes)]
    raw[0] = raw[0] % 255 + 1
    raw[-1] = raw[-1] % 255 + 1
    return bytes(raw)


def fingerprint_args(entries, dedup_keys, layers, salt=(0, 0)) -> list:
    """Build the per-item ARGV of the backfeed script for a fingerprint filter.

    LAYERS is a sequence of (seed, slot_bytes, bucket_slots, chunks, buckets, first_key): a
    layer's chunks each hold BUCKETS buckets of BUCKET_SLOTS slots. For each item the list holds
    the entry, then per layer the KEYS index of its chunk, the first and last byte offsets of its
    two buckets in that chunk (two independent choices), and its fingerprint.
    """
    for layer in layers:
        if not 1 <= layer[1] <= 8:
            raise ValueError("slot_bytes must be 1 to 8")
    out: list = []
    for entry, key in zip(entries, dedup_keys):
        h = keyed_hash(_as_bytes(key), salt)
        out.append(entry)
        for seed, slot_bytes, bucket_slots, chunks, buckets, first_key in layers:
            layer_salt = (seed + 1) & MASK64
            a = fmix64(h ^ ((SEED_A * layer_salt) & MASK64))
            b = fmix64(h ^ ((SEED_B * layer_salt) & MASK64))
            size = slot_bytes * bucket_slots
            first, second = (a % buckets) * size, (b % buckets) * size
            out += [
                first_key + fmix64(a ^ SEED_C) % chunks,
                first,
                first + size - 1,
                second,
                second + size - 1,
            ]
            out.append(fingerprint(fmix64(b ^ SEED_C), slot_bytes))
    return out


MAX_KEY_INDEX = 2**24 - 1  # a blocked item's chunk (its KEYS index) travels in 3 bytes


def block_args(entries, dedup_keys, layers, salt=(0, 0)) -> list:
    """Build the per-item ARGV of the backfeed script for a blocked fingerprint filter.

    LAYERS is a sequence of (seed, slot_bytes, bucket_slots, chunks, buckets, first_key, block):
    a layer's chunks each hold BUCKETS buckets (whole blocks of BLOCK buckets) of BUCKET_SLOTS
    slots. An item's block is chosen by one hash, its two buckets (distinct) in that block by the
    other. For each item the list holds the entry, then per layer the first byte offset of its
    lower bucket, the last byte offset of its higher one (one GETRANGE reads both and what lies
    between), its fingerprint, and 4 bytes: how many buckets the higher lies past the lower, then
    the KEYS index of its chunk (big-endian, 3 bytes).
    """
    for layer in layers:
        if not 1 <= layer[1] <= 8:
            raise ValueError("slot_bytes must be 1 to 8")
        if not 2 <= layer[6] <= 256 or layer[4] % layer[6]:
            raise ValueError("a block holds 2 to 256 buckets, and a chunk whole blocks")
        if layer[5] + layer[3] - 1 > MAX_KEY_INDEX:
            raise ValueError("a blocked layer's chunks must have KEYS indexes under 2**24")
    out: list = []
    for entry, key in zip(entries, dedup_keys):
        h = keyed_hash(_as_bytes(key), salt)
        out.append(entry)
        for seed, slot_bytes, bucket_slots, chunks, buckets, first_key, block in layers:
            layer_salt = (seed + 1) & MASK64
            a = fmix64(h ^ ((SEED_A * layer_salt) & MASK64))
            b = fmix64(h ^ ((SEED_B * layer_salt) & MASK64))
            size = slot_bytes * bucket_slots
            start = (a % (buckets // block)) * block
            one = b % block
            other = (one + 1 + (b >> 32) % (block - 1)) % block
            low, high = min(one, other), max(one, other)
            chunk = first_key + fmix64(a ^ SEED_C) % chunks
            out += [(start + low) * size, (start + high) * size + size - 1]
            out.append(fingerprint(fmix64(b ^ SEED_C), slot_bytes))
            out.append(bytes((high - low, chunk >> 16, (chunk >> 8) & 0xFF, chunk & 0xFF)))
    return out
