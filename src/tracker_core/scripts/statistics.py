"""The scripts of the statistics: sample_backlog, rollup_hour, rollup_day and top_history."""

from __future__ import annotations

from enum import IntEnum

from tracker_core.scripts.binding import CallerKey, Many, RawBinding


class SampleBacklogCodes(IntEnum):
    ALREADY = 0
    STORED = 1


# Store MINUTE's backlog sample unless it has one.
sample_backlog = RawBinding(
    "sample_backlog",
    keys=(CallerKey("minute:M", lambda k, minute: k.minute(minute)),),
    args={"backlog": "backlog", "ttl_s": "expiry of the minute hash"},
    codes=SampleBacklogCodes,
)


class RollupHourCodes(IntEnum):
    ALREADY = 0
    WRITTEN = 1


# Sum HOUR's 60 minute hashes into its hour hash, once.
rollup_hour = RawBinding(
    "rollup_hour",
    keys=(CallerKey("hour:H", lambda k, hour: k.hour(hour)),),
    more_keys=Many("minute:M", lambda k, hour: [k.minute(hour * 60 + i) for i in range(60)]),
    args={"ttl_s": "expiry of the hour hash"},
    codes=RollupHourCodes,
)


class RollupDayCodes(IntEnum):
    HOURS_PENDING = -1
    ALREADY = 0
    WRITTEN = 1


# Sum DAY's 24 hour hashes into the project's days hash, once.
rollup_day = RawBinding(
    "rollup_day",
    keys=("days",),
    more_keys=Many("hour:H", lambda k, day: [k.hour(day * 24 + i) for i in range(24)]),
    args={"day": "the day"},
    codes=RollupDayCodes,
)


class TopHistoryCodes(IntEnum):
    NOTHING_DUE = 0


def _tiers(tiers) -> list:
    args = []
    for interval_s, kept, expiry_s in tiers:
        args += [interval_s * 1000, kept, expiry_s * 1000]
    return args


# Add a point of the TOP downloaders' item counts to each stream due; TIERS: (interval_s, entries
# kept, expiry_s) per stream. Returns how many streams got one.
top_history = RawBinding(
    "top_history",
    keys=("downloader_bytes", "downloader_count"),
    more_keys=Many("top_history:S", lambda k, tiers: [k.top_history(tier[0]) for tier in tiers]),
    args={"now_ms": "now (ms)", "top": "N"},
    more_args=Many("then for each stream", _tiers),
    codes=TopHistoryCodes,
)
