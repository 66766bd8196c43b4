"""Whether a Bloom filter holds names, read without writing: the same test as bloom_add's.

Owns the read-only commands for each kind (a BITFIELD_RO per layer; a fingerprint filter's
buckets and stash) and their reading, for the admin's "seen?" (seen_by), the item story and
a sharded project's lookups.
"""

from __future__ import annotations

from collections.abc import Callable

from tracker_core import keyspace
from tracker_core.infra.connection import ENCODING, ENCODING_ERRORS
from tracker_core.items.bloom_geometry import BUCKET_SLOTS, Geometry
from tracker_core.items.bloom_plan import FIXED_KEYS, Plan


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
            ops: list = []
            for position in args[i + 1 : i + 1 + k]:
                ops += ("GET", "u1", position)
            commands.append(("BITFIELD_RO", chunk_key, *ops))
            i += 1 + k

    return commands, _answer(len(dedup_keys), layers, lambda replies, at, _layer: all(replies[at]))


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


def _layer_fields(plan: Plan, dedup_keys, per_layer: int):
    """(layer, its PER_LAYER hashed fields, its stash key) for each name of DEDUP_KEYS in turn,
    every layer of the name (a fingerprint plan's ARGV: the entry, then per_layer per layer)."""
    layers = len(plan.layers)
    args = plan.hashed([b""] * len(dedup_keys), dedup_keys)
    for i in range(0, len(args), 1 + per_layer * layers):
        for layer in range(layers):
            at = i + 1 + layer * per_layer
            yield layer, args[at : at + per_layer], plan.chunk_keys[len(plan.chunk_keys) - layers + layer]


def _answer(names: int, layers: int, layer_holds) -> Callable[[list], list[bool]]:
    """The reader of a membership's replies: a name is held when one of its layers holds it,
    LAYER_HOLDS(replies, at, layer) for the name's AT-th look (name x layers + layer)."""

    def answer(replies: list) -> list[bool]:
        return [
            any(layer_holds(replies, n * layers + layer, layer) for layer in range(layers))
            for n in range(names)
        ]

    return answer


def _fingerprint_membership(plan: Plan, dedup_keys):
    """membership for a fingerprint filter: per layer its two buckets and its stash, which
    counts only where both buckets are full (as bloom_add looks)."""
    commands, fingerprints = [], []
    for _layer, fields, stash in _layer_fields(plan, dedup_keys, 6):
        chunk_index, s1, e1, s2, e2, fingerprint = fields
        chunk = plan.chunk_keys[chunk_index - FIXED_KEYS - 1]
        commands += [
            ("GETRANGE", chunk, s1, e1),
            ("GETRANGE", chunk, s2, e2),
            ("SISMEMBER", stash, b"%d %d " % (s1, s2) + fingerprint),
        ]
        fingerprints.append(fingerprint)

    def layer_holds(replies: list, at: int, layer: int) -> bool:
        first, second = _raw(replies[3 * at]), _raw(replies[3 * at + 1])
        fingerprint, size = fingerprints[at], plan.layers[layer].slot_bytes
        if _holds(first, fingerprint) or _holds(second, fingerprint):
            return True
        return _full(first, size) and _full(second, size) and bool(replies[3 * at + 2])

    return commands, _answer(len(dedup_keys), len(plan.layers), layer_holds)


def _block_membership(plan: Plan, dedup_keys):
    """membership for a blocked fingerprint filter: per layer one GETRANGE from its lower
    bucket to its higher one, and its stash, which counts only where both are full."""
    commands, looks = [], []
    for _layer, fields, stash in _layer_fields(plan, dedup_keys, 4):
        low, high, fingerprint, info = fields
        chunk = plan.chunk_keys[(info[1] << 16 | info[2] << 8 | info[3]) - FIXED_KEYS - 1]
        commands += [
            ("GETRANGE", chunk, low, high),
            ("SISMEMBER", stash, b"%d %d " % (low, high) + fingerprint),
        ]
        looks.append((fingerprint, high - low + 1))

    def layer_holds(replies: list, at: int, _layer: int) -> bool:
        fingerprint, span = looks[at]
        size = len(fingerprint)
        bucket = size * BUCKET_SLOTS
        both = _raw(replies[2 * at]).ljust(span, b"\0")  # zeros past the bitmap's end: empty slots
        low, high = both[:bucket], both[span - bucket :]
        if _holds(low, fingerprint) or _holds(high, fingerprint):
            return True
        return not _holds(low, bytes(size)) and not _holds(high, bytes(size)) and bool(replies[2 * at + 1])

    return commands, _answer(len(dedup_keys), len(plan.layers), layer_holds)
