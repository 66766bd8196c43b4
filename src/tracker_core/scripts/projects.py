"""The scripts that make a project and change its settings, limits and blocks: create_project,
pad_hashes, set_settings, set_limit, set_blocks."""

from __future__ import annotations

from enum import IntEnum

from tracker_core.scripts.binding import Derived, Many, RawBinding


def _flat(mapping: dict) -> list:
    return [x for pair in mapping.items() for x in pair]


class CreateProjectCodes(IntEnum):
    EXISTS = 0
    CREATED = 1


# Create K's project with SETTINGS unless it exists.
create_project = RawBinding(
    "create_project",
    keys=("settings", "blocked", "stats"),
    args={"now_ms": "now (ms)"},
    more_args=Many(
        "field, value pairs of the initial settings",
        lambda settings, blocked: (*_flat(settings), "--blocked", *blocked),
    ),
    defaults={"blocked": ()},
    codes=CreateProjectCodes,
)


class PadHashesCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    PADDED = 1


# Give K's settings and stats the fields that keep them hashtables.
pad_hashes = RawBinding("pad_hashes", keys=("settings", "stats"), codes=PadHashesCodes)


class SetSettingsCodes(IntEnum):
    UNKNOWN_PROJECT = -1
    DAMAGED = -2  # ARGV is not whole pairs, or the stored age is not an integer
    CHANGED = -3  # a field is no longer what the caller checked: read again and check again


# Store VALUES ('' deletes a field) and bump the age, provided the stored fields still hold
# EXPECTED ('' for absent): the new age, or a code.
set_settings = RawBinding(
    "set_settings",
    keys=("settings",),
    args={
        "project": Derived("project name", lambda k: k.project),
        "channel": "channel to publish on",
        "checked": Derived("N", lambda expected: len(expected or {})),
    },
    more_args=Many(
        "then N field, value pairs the stored settings must still hold",
        lambda expected, values: (*_flat(expected or {}), *_flat(values)),
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
set_limit = RawBinding(
    "set_limit",
    keys=("settings", "limits", "limits_ready", "limit_tat"),
    args={
        "project": Derived("project name", lambda k: k.project),
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


# Replace K's blocks (own entries, copy of the global ones) and their INDEX, unless they changed
# since the caller read OWN_READ and COPY_READ.
set_blocks = RawBinding(
    "set_blocks",
    keys=("settings", "blocked", "blocked_global", "blocked_index"),
    args={
        "own_read_count": Derived("n1", lambda own_read: len(own_read)),
        "copy_read_count": Derived("n2", lambda copy_read: len(copy_read)),
        "own_count": Derived("n3", lambda own: len(own)),
        "copy_count": Derived("n4", lambda copy: len(copy)),
    },
    more_args=Many(
        "then n1 entries",
        lambda own_read, copy_read, own, copy, index: (*own_read, *copy_read, *own, *copy, *index),
    ),
    codes=SetBlocksCodes,
)
