"""The scripts of the webhooks (tracker_core.notify; global keys under one hash tag, no project):
the hooks (notify_hooks), the detector's state and the outbox it fills (notify_emit), and a
delivery's claim (notify_claim) and outcome (notify_finish)."""

from __future__ import annotations

from enum import IntEnum

from tracker_core import keyspace
from tracker_core.scripts.binding import Derived, Many, RawBinding, global_key

HOOKS = global_key("hooks", keyspace.NOTIFY_HOOKS)
HOOK_STATS = global_key("hook_stats", keyspace.NOTIFY_HOOK_STATS)
STATE = global_key("state", keyspace.NOTIFY_STATE)
DELIVERIES = global_key("deliveries", keyspace.NOTIFY_DELIVERIES)
DUE = global_key("due", keyspace.NOTIFY_DUE)
CLAIMED = global_key("claimed", keyspace.NOTIFY_CLAIMED)
CLAIMS = global_key("claims", keyspace.NOTIFY_CLAIMS)
STATS = global_key("stats", keyspace.NOTIFY_STATS)
NOT_HOLDER = -4


class NotifyHooksCodes(IntEnum):
    DONE = 1
    NO_CHANGE = 0  # the id to add exists, or the one to remove does not
    FULL = -1  # adding would pass the bound on hooks: nothing written


# Add a hook (RECORD, at most MAX_HOOKS in all) or remove one and its figures.
notify_hooks = RawBinding(
    "notify_hooks",
    keys=(HOOKS, HOOK_STATS),
    args={
        "op": "'add' or 'remove'",
        "hook_id": "hook id",
        "record": "the JSON record",
        "max_hooks": "most hooks",
    },
    defaults={"record": "", "max_hooks": 0},
    codes=NotifyHooksCodes,
)


class NotifyEmitCodes(IntEnum):
    WRITTEN = 1  # {1, queued}
    CHANGED = 0  # another maintainer wrote the state since it was read: nothing written


# Write the detector's state CHANGES (JSON) and queue DELIVERIES (pairs of id and record).
notify_emit = RawBinding(
    "notify_emit",
    keys=(STATE, DELIVERIES, DUE, STATS),
    args={"now_ms": "now (ms)", "max_queued": "most deliveries", "changes": "the state changes"},
    more_args=Many("the deliveries", lambda deliveries: [x for pair in deliveries for x in pair]),
    codes=NotifyEmitCodes,
)


class NotifyClaimCodes(IntEnum):
    CLAIMED = 1  # {1, id, record, ...}


# Claim up to COUNT due deliveries for HOLDER for CLAIM_MS.
notify_claim = RawBinding(
    "notify_claim",
    keys=(DUE, CLAIMED, CLAIMS, DELIVERIES),
    args={
        "now_ms": "now (ms)",
        "holder": "holder id",
        "claim_ms": "claim length (ms)",
        "count": "most deliveries",
    },
    codes=NotifyClaimCodes,
)


class NotifyFinishCodes(IntEnum):
    RECORDED = 1
    NOT_HOLDER = NOT_HOLDER  # the claim expired and another deliverer has it: nothing written


# Record OUTCOME of HOLDER's claimed delivery DELIVERY_ID.
notify_finish = RawBinding(
    "notify_finish",
    keys=(DUE, CLAIMED, CLAIMS, DELIVERIES, HOOKS, HOOK_STATS, STATS),
    args={
        "holder": "holder id",
        "delivery_id": "delivery id",
        "outcome": "outcome",
        "now_ms": "now (ms)",
        "hook_id": "hook id",
        "status": "status text",
        "retry_ms": Derived("when to try again", lambda retry_ms: int(retry_ms)),
        "record": "the record",
    },
    defaults={"retry_ms": 0, "record": ""},
    codes=NotifyFinishCodes,
)
