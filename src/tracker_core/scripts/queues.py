"""The scripts that look for items and move them between queues (admin verbs, give-backs):
item_status, clear_queue, move_items, requeue_dead, redo_items, hold_limited, hold_queued.

Where the caller picks a queue (``queue``, ``source``, ``target``) it passes the key
ProjectKeys built for it (ProjectKeys.queue); every other key comes from the ProjectKeys.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from tracker_core.scripts.binding import Binding, Derived, Flag, Many, RawBinding, given, pairs, wire

# Where an item waits to be served, in the order item_status and redo_items take them: the
# shared queues, the held items and their way in, the limits that hold some, the limits, the
# set on its way to a segment file, and the segments.
WAITING_PLACES = (
    "todo",
    "backfeed",
    "secondary",
    "redo",
    "limited",
    "limited_in",
    "limits_ready",
    "limits",
    "offloading",
    "segments",
)


def _owner_queues(k, owners) -> list:
    return [k.downloader_queue(owner) for owner in owners]


class ItemStatusCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class ItemStatusReply(NamedTuple):
    code: int  # ItemStatusCodes
    status: str  # out, done, dead, todo, offloaded, or '' (found nowhere here)
    queue: str
    detail: str
    owners: int
    segments: int
    out_score: str  # out: its `out` score ('' otherwise)
    extra: str  # out: earlier claim rounds (JSON or ''); offloaded: the staged segment's number


# Every place ITEM can be, looking in the queues of OWNERS.
item_status = Binding(
    "item_status",
    keys=(
        "settings",
        "claims",
        "done",
        "dead",
        *WAITING_PLACES,
        "segment_queues",
        "downloader_queues",
        "out",
        "reclaim_history",
    ),
    more_keys=Many("downloaders' own queues", _owner_queues),
    args={"item": "item name"},
    more_args=Many("the downloaders whose queues are", lambda owners: owners),
    reply=lambda reply: ItemStatusReply(*reply),
    shape=ItemStatusReply,
    codes=ItemStatusCodes,
)


class ClearQueueCodes(IntEnum):
    UNKNOWN_PROJECT = -1


# Drop every item of QUEUE: how many, or a code.
clear_queue = RawBinding("clear_queue", keys=("settings", given("queue", "the queue")), codes=ClearQueueCodes)


class MoveItemsCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    NOT_PAIRS = -2


# Move ITEMS still in SOURCE to TARGET (owned by downloader OWNER, or ''), HELD ones to the way-in
# set: how many moved, or a code.
move_items = RawBinding(
    "move_items",
    keys=(
        "settings",
        given("source", "source queue"),
        given("target", "target queue"),
        "downloader_queues",
        "limited_in",
    ),
    args={"owner": "downloader owning the target queue"},
    more_args=Many("pairs: item name", pairs),
    codes=MoveItemsCodes,
)


class RequeueDeadCodes(IntEnum):
    NOT_PAIRS = -1


# Put dead ITEMS back into TARGET, HELD ones to the way-in set: how many were dead, or a code.
requeue_dead = RawBinding(
    "requeue_dead",
    keys=("dead", given("target", "target queue"), "stats", "limited_in", "downloader_queues"),
    args={"owner": "downloader owning the target queue"},
    more_args=Many("pairs: item name", pairs),
    codes=RequeueDeadCodes,
)


class RedoItemsCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1
    STALE_AGE = -2  # classified at another settings age: reclassify and call again
    OWNERS_CHANGED = -3  # todo:d is not the downloaders given: read it again
    NOT_TRIPLES = -4


class RedoReply(NamedTuple):
    code: int  # RedoItemsCodes
    settings_age: int
    from_done: int = 0
    from_seen: int = 0
    held: int = 0
    out: int = 0
    queued: int = 0
    dead: int = 0
    offloaded: int = 0
    not_seen: int = 0
    maybe_offloaded: int = 0

    def counts(self) -> dict[str, int]:
        """The per-name counts by field (from_done ... maybe_offloaded)."""
        return {field: int(getattr(self, field)) for field in self._fields[2:]}


def _owners_and_triples(owners, items, held, seen) -> list:
    args = list(owners)
    for name, entry, was_seen in zip(items, held, seen, strict=True):
        args += [wire(name), wire(entry), "1" if was_seen else "0"]
    return args


# Re-queue ITEMS into TARGET on purpose. AGE: the settings age HELD was classified at ('' for no
# check); OWNERS: every downloader todo:d lists, in that order; SEEN: per item, whether the
# Bloom filter has seen it.
redo_items = Binding(
    "redo_items",
    keys=(
        "settings",
        "done",
        "out",
        "claims",
        "dead",
        *WAITING_PLACES,
        "stats",
        given("target", "target queue"),
        "downloader_queues",
    ),
    more_keys=Many("every downloader's own queue", _owner_queues),
    args={
        "age": "the settings age",
        "owner": "downloader owning the target queue",
        "even_if_offloaded": Flag("'1': re-queue a seen name found nowhere"),
        "downloaders": Derived("D", lambda owners: len(owners)),
    },
    more_args=Many("the downloaders whose queues are", _owners_and_triples),
    reply=lambda reply: RedoReply(reply[0], int(reply[1]), *reply[2:]),
    shape=RedoReply,
    codes=RedoItemsCodes,
)


class HoldLimitedCodes(IntEnum):
    NONE_WAITING = 0
    BAD_ARGUMENT = -1


# File up to MOST held items from the way-in set: how many moved, or a code.
hold_limited = RawBinding(
    "hold_limited",
    keys=("limited_in", "limited", "limits_ready", "limit_tat"),
    args={"most": "most entries to move"},
    codes=HoldLimitedCodes,
)


class HoldQueuedCodes(IntEnum):
    NOT_PAIRS = -1


# Move ITEMS still in QUEUE to the way-in set as HELD: how many moved.
hold_queued = RawBinding(
    "hold_queued",
    keys=(given("queue", "a shared queue"), "limited_in"),
    more_args=Many("pairs: item name", pairs),
    codes=HoldQueuedCodes,
)
