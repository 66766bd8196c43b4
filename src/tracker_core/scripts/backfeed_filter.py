"""The scripts of the backfeed's Bloom filter: bloom_add (test and queue a batch) and
bloom_configure (fix the filter's geometry while it is empty); tracker_core.items.bloom plans both."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from tracker_core.scripts.binding import Binding, Flag, Many, given


class BloomAddCodes(IntEnum):
    OK = 0
    UNKNOWN_PROJECT = -1
    LAYERS_CHANGED = -2  # the filter has another number of layers than planned: reload, retry
    WRONG_SECRET = -3
    FULL = -4  # the bound would be passed by this batch's new items: nothing set or queued
    SPLIT = -5  # {-5, cut, 0}: the batch would pass the last layer's capacity: send CUT items first


class BloomAddReply(NamedTuple):
    code: int  # BloomAddCodes
    new: int
    seen: int


# Queue into TARGET the COUNT entries the filter has not seen. CHUNK_KEYS, LAYERS, LAST_CAPACITY,
# KIND and KS come from the caller's bloom.Plan, HASHED from Plan.args; COUNTED is the other set
# the BOUND counts (see the contract). The hash plan indexes KEYS past the declared keys.
bloom_add = Binding(
    "bloom_add",
    keys=(
        "settings",
        given("target", "target queue"),
        "stats",
        "bloom",
        "downloader_queues",
        "backfeed_secrets",
        "backfeed_shards",
        "limited",
        given("counted", "the other set the bound counts"),
    ),
    more_keys=Many("bitmaps of every layer's chunks", lambda chunk_keys: chunk_keys),
    args={
        "layers": "layers the caller planned for",
        "last_capacity": "capacity of the last layer",
        "owner": "downloader owning the target queue",
        "secret_digest": "secret digest to check",
        "shard": "shard name",
        "new_field": "counter field for new items",
        "seen_field": "field for seen items",
        "count": "number of items N",
        "bound": "bound: most items",
        "kind": "the filter's kind",
    },
    more_args=Many("per layer: k", lambda ks, hashed: (*ks, *hashed)),
    defaults={"kind": "layered"},
    reply=lambda reply: BloomAddReply(int(reply[0]), int(reply[1]), int(reply[2])),
    shape=BloomAddReply,
    codes=BloomAddCodes,
)


class BloomConfigureCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    NOT_EMPTY = -2  # the filter holds items: its geometry can no longer change
    NOT_A_NUMBER = -3


def _geometry(reply: list) -> dict | int:
    if len(reply) == 1:
        return reply[0]
    return dict(zip(reply[::2], reply[1::2]))


# Fix the filter's geometry while it is empty: the geometry in force as a dict of text (with its
# secret salt: keep it out of any output), or a code. KIND, BITS_PER_ITEM, SALT and BLOCK (a
# fingerprint filter's buckets per block, 0 for none): see tracker_core.items.bloom.
bloom_configure = Binding(
    "bloom_configure",
    keys=("settings", "bloom"),
    args={
        "capacity": "capacity",
        "fp_rate": "false-positive rate",
        "growth": "growth factor",
        "tightening": "tightening ratio",
        "chunk_bits": "bits per chunk",
        "replace": Flag("'1' to replace a configured geometry"),
        "kind": "kind",
        "bits_per_item": "least bits",
        "salt": "the filter's hash salt",
        "block": "a fingerprint filter's buckets per block",
    },
    defaults={"kind": "layered", "bits_per_item": 35, "salt": "", "block": 0},
    reply=_geometry,
    codes=BloomConfigureCodes,
)
