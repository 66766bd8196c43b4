"""The scripts that make a project and change its settings, limits and blocks: create_project,
pad_hashes, set_settings, set_limit, set_blocks."""

from __future__ import annotations

from enum import IntEnum

from tracker_core.scripts.binding import Binding, Derived, Many


def _flat(mapping: dict) -> list:
    return [x for pair in mapping.items() for x in pair]


class CreateProjectCodes(IntEnum):
    EXISTS = 0
    CREATED = 1


# Create K's project with SETTINGS unless it exists.
create_project = Binding(
    "create_project",
    keys=("settings", "blocked", "stats"),
    args={"now_ms": "now (ms)"},
    more_args=Many(
        "field, value pairs of the initial settings",
        lambda k, call: (*_flat(call["settings"]), "--blocked", *call["blocked"]),
        "settings",
        "blocked",
    ),
    defaults={"blocked": ()},
    codes=CreateProjectCodes,
)


class PadHashesCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    PADDED = 1


# Give K's settings and stats the fields that keep them hashtables.
pad_hashes = Binding("pad_hashes", keys=("settings", "stats"), codes=PadHashesCodes)


class SetSettingsCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    DAMAGED = -2  # ARGV is not whole pairs, or the stored age is not an integer
    CHANGED = -3  # a field is no longer what the caller checked: read again and check again


# Store VALUES ('' deletes a field) and bump the age, provided the stored fields still hold
# EXPECTED ('' for absent): the new age, or a code.
set_settings = Binding(
    "set_settings",
    keys=("settings",),
    args={
        "project": Derived("project name", lambda k, call: k.project),
        "channel": "channel to publish on",
        "checked": Derived("N", lambda k, call: len(call["expected"] or {}), "expected"),
    },
    more_args=Many(
        "then N field, value pairs the stored settings must still hold",
        lambda k, call: (*_flat(call["expected"] or {}), *_flat(call["values"])),
        "expected",
        "values",
    ),
    defaults={"expected": None},
    codes=SetSettingsCodes,
)


class SetLimitCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    UNKNOWN_LIMIT = -2
    TOO_MANY = -3


# Set (OP 'set', RECORD the JSON) or remove (OP 'remove') limit NAME: the new settings age, or a
# code.
set_limit = Binding(
    "set_limit",
    keys=("settings", "limits", "limits_ready", "limit_tat"),
    args={
        "project": Derived("project name", lambda k, call: k.project),
        "channel": "channel to publish on",
        "op": "'set' or 'remove'",
        "name": "limit name",
        "record": "JSON record",
        "max_limits": "the most limits a project may have",
    },
    codes=SetLimitCodes,
)


class SetBlocksCodes(IntEnum):
    REPLACED = 1
    CHANGED = 0  # the blocks changed since the caller read them: read again and retry
    UNKNOWN_PROJECT = -1


def _length(name: str) -> Derived:
    """set_blocks' count of list NAME (its header calls them n1 to n4, in this order)."""
    return Derived(f"n{_LISTS.index(name) + 1}", lambda k, call: len(call[name]), name)


_LISTS = ("own_read", "copy_read", "own", "copy")

# Replace K's blocks (own entries, copy of the global ones) and their INDEX, unless they changed
# since the caller read OWN_READ and COPY_READ.
set_blocks = Binding(
    "set_blocks",
    keys=("settings", "blocked", "blocked_global", "blocked_index"),
    args={f"{name}_count": _length(name) for name in _LISTS},
    more_args=Many(
        "then n1 entries",
        lambda k, call: (*call["own_read"], *call["copy_read"], *call["own"], *call["copy"], *call["index"]),
        "own_read",
        "copy_read",
        "own",
        "copy",
        "index",
    ),
    codes=SetBlocksCodes,
)
