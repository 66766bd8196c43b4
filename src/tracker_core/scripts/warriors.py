"""The scripts of the warrior HQ's registry (global keys, no project): register_warrior and
warrior_seen."""

from __future__ import annotations

from enum import IntEnum

from tracker_core import keyspace
from tracker_core.scripts.binding import CallerKey, RawBinding, global_key

WARRIORS = global_key("warriors", keyspace.WARRIORS)
WARRIORS_SEEN = global_key("warriors:seen", keyspace.WARRIORS_SEEN)


class RegisterWarriorCodes(IntEnum):
    REGISTERED = 1
    THROTTLED = -1
    REGISTRY_FULL = -2


# Add a warrior to the registry within its bounds.
register_warrior = RawBinding(
    "register_warrior",
    keys=(
        WARRIORS,
        WARRIORS_SEEN,
        CallerKey(
            "registrations:ADDRESS",
            lambda address_key: keyspace.warrior_registrations(address_key),
        ),
    ),
    args={
        "now_ms": "now (ms)",
        "warrior_id": "warrior id",
        "record": "JSON record",
        "forget_before_ms": "forget warriors silent since before this time",
        "max_warriors": "most warriors the registry holds",
        "max_registrations": "most registrations per address per window",
        "window_ms": "the throttle's window",
        "seen_ms": "where a new warrior goes in warriors:seen",
    },
    codes=RegisterWarriorCodes,
)


class WarriorSeenCodes(IntEnum):
    SEEN = 1
    UNKNOWN_WARRIOR = 0
    TOO_LARGE = -1  # the merged record would pass its bound: nothing written


# Note a registered warrior's heartbeat BEAT (JSON).
warrior_seen = RawBinding(
    "warrior_seen",
    keys=(WARRIORS, WARRIORS_SEEN),
    args={
        "now_ms": "now (ms)",
        "warrior_id": "warrior id",
        "forget_before_ms": "forget warriors silent since before this time",
        "beat": "the heartbeat",
        "max_record": "most bytes a record may take",
    },
    codes=WarriorSeenCodes,
)
