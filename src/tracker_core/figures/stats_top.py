"""The top downloaders' progress: their cumulative item counts, one point per interval.

The TOP_HISTORY_N downloaders with the most bytes, one point per interval in a capped stream per
resolution (TOP_HISTORY_TIERS: interval in seconds, points kept, expiry in seconds): ten minutes
for two days, an hour for sixty days. The chart serves the ten-minute points and the hourly ones
of the week before. Written by lua/top_history-n.lua, so two writers (maintain passes, snapshots
in several processes) never add two points for one interval: the check and the XADD are atomic.

Each shard of a sharded project (docs/sharding.md) records its own top downloaders, by its own
bytes; merged_points adds the shards' points of one interval up.
"""

from __future__ import annotations

import math

TOP_HISTORY_N = 10
TOP_HISTORY_TIERS = ((600, 288, 2 * 86_400), (3600, 1440, 60 * 86_400))
TOP_CHART_HOURS = 168  # the hour chart's points: the last week


def _to_int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def stream_points(entries) -> list[tuple[int, dict[str, int]]]:
    """(time in ms, {downloader: items}) of top-history stream entries, in the order given."""
    if not isinstance(entries, (list, tuple)):
        return []  # an error reply (a key of another type): no history rather than no page
    points = []
    for entry_id, fields in entries:
        points.append(
            (int(entry_id.split("-")[0]), {f: _to_int(v) for f, v in zip(fields[::2], fields[1::2])})
        )
    return points


def top_due(points: list, interval_s: int, now_ms: int) -> bool:
    interval_ms = interval_s * 1000
    return not points or points[-1][0] // interval_ms < now_ms // interval_ms


def top_chart(recent: list, hourly: list) -> dict:
    """The top downloaders' chart: hourly points (oldest first) before the recent ones.

    Series are the TOP_HISTORY_N downloaders with the highest last recorded count; a downloader
    outside the top at some point has null there (uPlot spans the gap).
    """
    cutoff = recent[0][0] if recent else math.inf
    points = [p for p in hourly if p[0] < cutoff] + list(recent)
    latest: dict[str, int] = {}
    for _, counts in points:
        latest.update(counts)
    names = sorted(latest, key=lambda n: (-latest[n], n))[:TOP_HISTORY_N]
    return {
        "t": [ms / 1000 for ms, _ in points],
        "series": {n: [counts.get(n) for _, counts in points] for n in names},
    }


def merged_points(shards: list[list], interval_s: int) -> list[tuple[int, dict[str, int]]]:
    """One project's top-history points (oldest first) from its SHARDS' points of one tier.

    The shards' points of one interval make one point, at the newest of their times; a
    downloader's count is the sum over them. Each shard records its own top TOP_HISTORY_N: a
    downloader missing from a point that names fewer has done nothing on that shard (counts 0),
    but one missing from a full point has a count there that was not recorded. Such a
    downloader is left out of the merged point (null in the chart, a gap uPlot spans) rather
    than shown with a partial sum, a false dip. A shard with no point in that interval (nobody
    did anything on it yet) adds nothing."""
    if len(shards) == 1:
        return list(shards[0])
    interval_ms = interval_s * 1000
    buckets: dict[int, list] = {}
    for points in shards:
        for ms, counts in points:
            buckets.setdefault(ms // interval_ms, []).append((ms, counts))
    merged = []
    for _, group in sorted(buckets.items()):
        full = [counts for _, counts in group if len(counts) >= TOP_HISTORY_N]
        names = {n for _, counts in group for n in counts if all(n in f for f in full)}
        totals = {n: sum(counts.get(n, 0) for _, counts in group) for n in sorted(names)}
        merged.append((max(ms for ms, _ in group), totals))
    return merged
