"""A sharded project's statistics (docs/sharding.md): every shard's figures read, one project's
answered.

Each shard keeps its own counters (minute and hour hashes, days, the top downloaders' history,
the done log, the leaderboard's hashes); they are read shard by shard (one pipeline each: a
Cluster serves one slot per pipeline) and added up here. What the first shard alone holds is
taken from it: the backlog samples (the
whole project's backlog, sampled on the first shard: a sum of samples taken at different moments
would be no sample). A one-shard project never comes here: its reads are what they always were.
"""

from __future__ import annotations

from tracker_core.figures import stats_ranges
from tracker_core.figures.stats_top import TOP_HISTORY_TIERS, merged_points
from tracker_core.project.shard_layout import summed


def _added(dicts: list[dict]) -> dict:
    return summed([dict(d) for d in dicts]) if dicts else {}


def _resolved_hours(hours: dict, minutes: dict, sum_counts) -> dict:
    """One shard's hours, those not rolled up yet summed from its own minutes (as _hour_rows does
    for a whole project): the shards' hours then add up whether or not each one rolled up."""
    return {
        h: counts or sum_counts(c for m, c in minutes.items() if m // 60 == h) for h, counts in hours.items()
    }


def _day_text(counts: dict) -> str:
    """COUNTS as a days hash field (stats_ranges.parse_day reads it back); no backlog: "-"."""
    return " ".join(str(counts[f]) if f in counts else "-" for f in stats_ranges.DAY_FIELDS)


def merged_days(days: list[dict]) -> dict:
    """The shards' days hashes as one. A day is the sum of the shards' roll-ups of it; a shard
    whose roll-ups all come later (added by a growth since, or none yet) adds nothing to it. A
    day a shard has not rolled up yet, though it rolled up an earlier one, is left out: the
    chart then sums it from the hours (added over the shards) instead of showing a part of it."""
    firsts = [min((int(d) for d in shard if d.lstrip("-").isdigit()), default=None) for shard in days]
    merged = {}
    for day in {d for shard in days for d in shard if d.lstrip("-").isdigit()}:
        parts = []
        for shard, first in zip(days, firsts, strict=True):
            if day in shard:
                parts.append(stats_ranges.parse_day(shard[day]))
            elif first is not None and first < int(day):
                break  # not rolled up on this shard yet
        else:
            merged[day] = _day_text(_added(parts))
    return merged


def merged_read(parts: list[dict], sum_counts) -> dict:
    """StatsReader._read's answers of every shard (shard order) as one project's."""
    minutes = {m: _added([p["minutes"][m] for p in parts]) for m in parts[0]["minutes"]}
    hours = _added([_resolved_hours(p["hours"], p["minutes"], sum_counts) for p in parts])
    (recent_s, _, _), (hourly_s, _, _) = TOP_HISTORY_TIERS
    top = {
        "recent": merged_points([p["top"]["recent"] for p in parts], recent_s),
        "hourly": merged_points([p["top"]["hourly"] for p in parts], hourly_s),
    }
    all_range = {}
    if parts[0]["all"]:
        all_range = {
            "days": merged_days([p["all"]["days"] for p in parts]),
            "hourly_top": merged_points([p["all"]["hourly_top"] for p in parts], hourly_s),
        }
    return {
        "all": all_range,
        "minutes": minutes,
        "hours": {h: hours.get(h, {}) for h in parts[0]["hours"]},
        # Each downloader and IP counted on one shard (shard_router.count_uniques): added up.
        "uniques": summed([p["uniques"] for p in parts]),
        "top": top,
    }


def newest_lines(shards: list[list[dict]], count: int) -> list[dict]:
    """The COUNT newest of the shards' log lines (each list newest first), newest first, by the
    done's own time ("at"), then its entry id."""

    lines = [line for shard in shards for line in shard]
    return sorted(lines, key=lambda line: (line["at"], line["id"]), reverse=True)[:count]


def newest_entries(shards: list[list], count: int) -> list:
    """The COUNT newest done log entries (entry id, flat fields) of the shards' XREVRANGE replies."""

    def at(entry) -> int:
        fields = dict(zip(entry[1][::2], entry[1][1::2]))
        try:
            return int(fields["at"])
        except (KeyError, TypeError, ValueError):
            return int(entry[0].split("-")[0])

    entries = [entry for reply in shards if isinstance(reply, list) for entry in reply]
    return sorted(entries, key=at, reverse=True)[:count]
