"""The scripts of a warrior's requests: claim, done, release, bury_unservable and uploaded.

claim and done run on every request; tracker_core.scripts.packed sends them pre-packed from
these same declarations.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from tracker_core import blocks
from tracker_core.scripts.binding import (
    MINUTES_A_DAY,
    Binding,
    CallerKey,
    ClockKey,
    Derived,
    Flag,
    Many,
    pairs,
)

# A named tuple from a sequence at C speed (the class call runs a Python __new__): the request
# hot path builds one per claim and per done.
_make = tuple.__new__

# The caller's own queue: the one key that changes from call to call within a minute.
OWN_QUEUE = CallerKey("todo:d:DOWNLOADER", lambda k, downloader: k.downloader_queue(downloader))
THIS_MINUTE = ClockKey("minute:M", lambda k, minute: k.minute(minute))


class ClaimCodes(IntEnum):
    OK = 200  # items given (at least one)
    BLOCKED = 403
    NOTHING = 404  # queues empty, project paused, claims capped or limited
    RATE_LIMITED = 429
    UNKNOWN_PROJECT = -1


class ClaimReply(NamedTuple):
    code: int  # ClaimCodes
    settings_age: int
    items: list


def claim_reply(reply: list) -> ClaimReply:
    return _make(ClaimReply, (reply[0], int(reply[1]), reply[2:]))


# Hand up to WANTED items to DOWNLOADER. DOWNLOADER_COUNTED and IP_COUNTED: the caller already
# counted them in today's uniques of the project whose created_ms is COUNTED_UNDER (the script
# then skips their PFADD).
claim = Binding(
    "claim",
    keys=(
        "settings",
        "blocked_index",
        OWN_QUEUE,
        "todo",
        "backfeed",
        "secondary",
        "redo",
        "out",
        "claims",
        "downloader_claims",
        "ratelimit",
        "stats",
        THIS_MINUTE,
        ClockKey("uniq:downloaders:D", lambda k, m: k.uniques("downloaders", m // MINUTES_A_DAY)),
        ClockKey("uniq:ips:D", lambda k, m: k.uniques("ips", m // MINUTES_A_DAY)),
        "limited",
        "limits_ready",
        "limit_tat",
        "limits",
        "dead",
        "reclaim_history",
    ),
    args={
        "now_ms": "now (ms)",
        "downloader": "downloader",
        "ip": "ip",
        "wanted": "items wanted",
        # Lua parses no addresses: the IP as the blocks index compares it (blocks.ip_key).
        "ip_key": Derived("the IP as the index compares it", blocks.ip_key),
        "counted_under": "the project's created_ms",
        "downloader_counted": Flag("'1': the caller already counted this downloader"),
        "ip_counted": Flag("'1': the caller already counted this IP"),
        # A sharded project's claim visits shard after shard (tracker_core.items.shard_router).
        "visit": "one visit of a claim that goes from shard to shard",
    },
    defaults={"counted_under": "", "downloader_counted": False, "ip_counted": False, "visit": ""},
    reply=claim_reply,
    shape=ClaimReply,
    codes=ClaimCodes,
)


class DoneCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class DoneReply(NamedTuple):
    code: int  # DoneCodes
    settings_age: int
    new: int
    repeated: int
    unknown: int
    refused: int
    clamped: int


def done_reply(reply: list) -> DoneReply:
    if len(reply) < 7:  # unknown project: {-1, 0}
        return DoneReply(reply[0], int(reply[1]), 0, 0, 0, 0, 0)
    reply[1] = int(reply[1])
    return _make(DoneReply, reply)


# Mark ITEMS done for DOWNLOADER; DOMAIN_BYTES is a flat (domain, bytes) list.
done = Binding(
    "done",
    keys=(
        "settings",
        "out",
        "claims",
        "done",
        "downloader_claims",
        "log",
        "downloader_count",
        "downloader_bytes",
        "downloader_version",
        "domain_bytes",
        "stats",
        THIS_MINUTE,
        "todo",
        "backfeed",
        "secondary",
        "redo",
        CallerKey("todo:d:SENDER", OWN_QUEUE.function),
        "bad_dones",
        "reclaim_history",
        "dead",
    ),
    args={
        "now_ms": "now (ms)",
        "downloader": "downloader",
        "version": "version",
        "item_id": "id (JSON text)",
        "ip": "the sender's IP",
        "domains": Derived("number of domains D", lambda domain_bytes: len(domain_bytes) // 2),
    },
    more_args=Many(
        "then D pairs (domain, bytes), then the item names",
        lambda domain_bytes, items: (*domain_bytes, *items),
    ),
    reply=done_reply,
    shape=DoneReply,
    codes=DoneCodes,
)


class BuryCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class BuryReply(NamedTuple):
    code: int  # BuryCodes
    buried: int


# Send claims of DOWNLOADER to `dead`; REASONS: flat (item, why).
bury_unservable = Binding(
    "bury_unservable",
    keys=("settings", "out", "claims", "downloader_claims", "reclaim_history", "dead", "stats"),
    args={"now_ms": "now (ms)", "downloader": "downloader"},
    more_args=Many("pairs (item, reason)", lambda reasons: reasons),
    reply=lambda reply: BuryReply(*reply),
    shape=BuryReply,
    codes=BuryCodes,
)


class ReleaseCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1
    STALE_AGE = -2  # classified at another settings age: reload the limits and call again


class ReleaseReply(NamedTuple):
    code: int  # ReleaseCodes
    settings_age: int
    released: int
    ignored: int
    held: int


def _release_reply(reply: list) -> ReleaseReply:
    if len(reply) < 5:  # unknown project or a stale age: {code, age}
        return ReleaseReply(reply[0], int(reply[1]), 0, 0, 0)
    return ReleaseReply(reply[0], int(reply[1]), *reply[2:])


# Give claims back: DOWNLOADER's, or anyone's for ''; AGE is the settings age HELD (per item
# "LIMIT\0ITEM" or '') was classified at, '' for no check.
release = Binding(
    "release",
    keys=("settings", "out", "claims", "todo", "downloader_claims", "stats", "limited_in", "reclaim_history"),
    args={"now_ms": "now (ms)", "downloader": "downloader", "age": "the settings age"},
    more_args=Many("pairs: item name", pairs),
    reply=_release_reply,
    shape=ReleaseReply,
    codes=ReleaseCodes,
)


class UploadedCodes(IntEnum):
    OK = 200
    UNKNOWN_PROJECT = -1


class UploadedReply(NamedTuple):
    code: int  # UploadedCodes
    settings_age: int


# Record that UPLOADER uploaded ITEM's data to SERVER.
uploaded = Binding(
    "uploaded",
    keys=("settings", "uploads", "stats"),
    args={"now_ms": "now (ms)", "uploader": "uploader", "item": "item", "server": "server"},
    reply=lambda reply: UploadedReply(reply[0], int(reply[1])),
    shape=UploadedReply,
    codes=UploadedCodes,
)
