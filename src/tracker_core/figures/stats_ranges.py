"""The leaderboard's chart ranges (hour, day, week, all) and the per-downloader chart.

Each range is read from the coarsest counters that still draw it well, so every answer has at
most MAX_RANGE_POINTS points however old the project is:

- hour: the minute hashes of the last 60 minutes, one point a minute;
- day: the minute hashes of the last 24 hours (they live two days), one point per ten minutes;
- week: the hour hashes of the last 168 hours (they live 60 days), one point an hour;
- all: the project's days hash (rollup_day-25.lua, one field a day for the project's life) from
  the day it was created, days not rolled up yet summed from the hours the snapshot holds;
  one point a day, or per several days for a project older than MAX_RANGE_POINTS days.

The top downloaders' history follows the same range (its streams hold ten-minute points for two
days and hourly ones for 60 days: "all" reaches back that far). A downloader's own chart is its
cumulative item count: the top-downloaders history where it was among the top, then its lines in
the recent done log, counted back from its total now.
"""

from __future__ import annotations

import math

from tracker_core import keyspace, scripts

MINUTE_S = 60
HOUR_S = 3600
DAY_S = 86_400
MAX_RANGE_POINTS = 750
# name -> (source counters, span in seconds (None: the project's life), seconds per point)
RANGES = {
    "hour": ("minute", HOUR_S, MINUTE_S),
    "day": ("minute", DAY_S, 600),
    "week": ("hour", 7 * DAY_S, HOUR_S),
    "all": ("day", None, DAY_S),
}
DEFAULT_RANGE = "week"  # what the live feed's snapshots carry: the hours a snapshot reads anyway
RECENT_DAYS = 8  # days the "all" range sums from hour hashes when not rolled up (a week of hours)
DAY_ROLLUP_LOOKBACK_D = 58  # hour hashes live 60 days: older days can no longer be summed
DAY_FIELDS = ("items_done", "bytes_done", "requests", "requests_served", "backlog")
DOWNLOADER_LOG_LINES = 2000  # the done log lines a downloader's chart reads at most


def roll_up_days(conn, k: keyspace.ProjectKeys, now_ms: int) -> int:
    """Roll the completed days of the last DAY_ROLLUP_LOOKBACK_D (none before the project was
    created) into the days hash, each day once; a day whose last hour is not rolled up yet
    waits. One HMGET finds the days still missing, so a pass where all are done costs two
    commands. CONN: redis-py or RawRedis. Returns how many days were written."""
    today = now_ms // (DAY_S * 1000)
    created_ms = int_or_none(conn.execute_command("HGET", k.settings, "created_ms"))
    start = today - DAY_ROLLUP_LOOKBACK_D
    if created_ms is not None:
        start = max(start, created_ms // (DAY_S * 1000))
    days = list(range(start, today))
    if not days:
        return 0
    found = conn.execute_command("HMGET", k.days, *days)
    written = 0
    for day, value in zip(days, found, strict=True):
        if value is None and scripts.rollup_day(conn, k, day=day) == scripts.rollup_day.codes.WRITTEN:
            written += 1
    return written


def int_or_none(value) -> int | None:
    """VALUE as an int; None when it is missing or no number (a field written by hand)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_day(value: str) -> dict[str, int]:
    """A days hash field ("items bytes requests served backlog") as counts; backlog "-": none."""
    counts = {}
    for name, part in zip(DAY_FIELDS, value.split(" "), strict=False):
        if part.lstrip("-").isdigit():
            counts[name] = int(part)
    return counts


def range_name(value: str | None) -> str:
    if value in RANGES:
        return value
    if value in (None, ""):
        return DEFAULT_RANGE
    raise ValueError(f"range must be one of {', '.join(RANGES)}")


def _sum(rows) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in rows:
        for field, value in counts.items():
            if field == "backlog":
                total[field] = value  # a sample: the last one of the bucket
            else:
                total[field] = total.get(field, 0) + value
    return total


def bucketed(rows: list[tuple[int, dict]], step_s: int) -> list[tuple[int, dict]]:
    """ROWS (time in s, counts), oldest first, summed into buckets of STEP_S seconds."""
    buckets: dict[int, list[dict]] = {}
    for t, counts in rows:
        buckets.setdefault(t - t % step_s, []).append(counts)
    return [(t, _sum(group)) for t, group in sorted(buckets.items())]


def range_chart(name: str, rows: list[tuple[int, dict]], step_s: int, done_total: int) -> dict:
    """Columnar series of one range (uPlot's shape) from ROWS already bucketed by STEP_S."""
    items = [c.get("items_done", 0) for _, c in rows]
    cumulative, running = [], done_total - sum(items)
    for n in items:
        running += n
        cumulative.append(max(running, 0))
    return {
        "range": name,
        "step_s": step_s,
        "t": [t for t, _ in rows],
        "items_done": items,
        "done_total": cumulative,
        "bytes_per_s": [c.get("bytes_done", 0) / step_s for _, c in rows],
        "requests": [c.get("requests", 0) for _, c in rows],
        "irsr": [c.get("requests_served", 0) / c["requests"] if c.get("requests") else None for _, c in rows],
        "backlog": [c.get("backlog") for _, c in rows],
    }


def day_rows(days_hash: dict, hours: dict, first_day: int, today: int) -> list[tuple[int, dict]]:
    """One row per day from FIRST_DAY to TODAY: the rolled-up day, else the HOURS held (hour
    number -> counts) summed, else nothing (a gap before the roll-up reached back)."""
    rows = []
    for day in range(first_day, today + 1):
        value = days_hash.get(str(day))
        if value is not None:
            counts = parse_day(value)
        else:
            counts = _sum(hours.get(h, {}) for h in range(day * 24, day * 24 + 24))
        rows.append((day * DAY_S, counts))
    return rows


def first_day(created_ms: int | None, days_hash: dict, today: int) -> int:
    """The first day of the "all" range: the project's creation, else its oldest rolled-up day,
    else a week ago."""
    candidates = [int(d) for d in days_hash if d.lstrip("-").isdigit()]
    if created_ms:
        candidates.append(created_ms // (DAY_S * 1000))
    return min(min(candidates, default=today - 6), today)


def step_for(span_days: int) -> int:
    """Seconds per point of the "all" range: a day, or as many days as keep it under the bound.

    bucketed() aligns buckets on multiples of the step since the epoch, not on the first day, so
    SPAN_DAYS days can touch one bucket more than SPAN_DAYS / step: the step leaves room for it."""
    if span_days <= MAX_RANGE_POINTS:
        return DAY_S
    return DAY_S * ((span_days - 2) // (MAX_RANGE_POINTS - 1) + 1)


def thin(points: list, limit: int = MAX_RANGE_POINTS) -> list:
    """At most LIMIT of POINTS, evenly spread, the newest always kept."""
    if len(points) <= limit:
        return points
    stride = math.ceil(len(points) / limit)
    kept = points[::-1][::stride][::-1]
    return kept


def downloader_history(
    log_entries, top_points: list[tuple[int, dict]], name: str, items_now: int, now_ms: int
) -> dict:
    """DOWNLOADER NAME's cumulative items over time (times in s, oldest first).

    LOG_ENTRIES: the newest done log lines (XREVRANGE, newest first); within them the count is
    worked back from ITEMS_NOW, one point per line of theirs. Before them, TOP_POINTS (the
    top-downloaders history, oldest first) where they were among the top.
    """
    points: list[tuple[float, int]] = [(now_ms / 1000, items_now)]
    running = items_now
    oldest_ms = now_ms
    for entry_id, flat in log_entries:
        fields = dict(zip(flat[::2], flat[1::2]))
        # "at": the done's own time (the tracker's clock); the entry id is Redis's.
        at_ms = int_or_none(fields.get("at")) or int(entry_id.split("-")[0])
        oldest_ms = min(oldest_ms, at_ms)
        if fields.get("downloader") != name:
            continue
        points.append((at_ms / 1000, running))
        running -= len(fields.get("items", "").split("\0"))
        points.append((at_ms / 1000 - 0.001, max(running, 0)))
    for at_ms, counts in top_points:
        if name in counts and (at_ms < oldest_ms or not log_entries):
            points.append((at_ms / 1000, counts[name]))
    points.sort()
    points = thin(points)
    return {
        "downloader": name,
        "items": items_now,
        "t": [t for t, _ in points],
        "items_total": [n for _, n in points],
    }
