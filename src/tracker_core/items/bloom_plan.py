"""What one call of the Bloom filter's script needs: the chunk keys, and each item hashed.

Owns Plan (the bitmap and stash keys of a geometry, and per layer where its chunks start) and the
choice of the hashing for the filter's kind and salt: compiled, or the pure twin when
TRACKER_PURE_PYTHON=1.
"""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.compiled import twins
from tracker_core.items.bloom_geometry import BUCKET_SLOTS, FINGERPRINT, Geometry

_impl, COMPILED = twins.load("bloom")
script_args = _impl.script_args
fingerprint_args = _impl.fingerprint_args
block_args = _impl.block_args
FIXED_KEYS = len(scripts.bloom_add.key_slots)  # keys of bloom_add before the bitmaps


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
