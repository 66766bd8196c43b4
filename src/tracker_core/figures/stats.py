"""Compute a project's statistics: IRSR, RTT, throughput, ETA, unique visitors and chart data.

Everything is read from counters the claim and done scripts keep (the project's ``stats`` hash,
per-minute hashes, per-day HyperLogLogs) in one pipelined round trip, so a snapshot costs the
same whether the project has a hundred items or a hundred million. A snapshot also maintains the
bounded chart data: it samples the backlog once per minute and rolls completed hours of minute
counters into hour hashes (each one script, written once), and records the top downloaders'
item counts every ten minutes and every hour when that point is due (one script, once per
interval), as `tracker maintain` does once a minute for every project. A sharded project's
shards are each read and maintained, and their figures merged (tracker_core.figures.stats_shards).
The upkeep of the chart data is stats_upkeep.py.
"""

from __future__ import annotations

import datetime as dt
import math

from tracker_core import keyspace
from tracker_core.figures import census, stats_ranges, stats_shards
from tracker_core.figures.stats_rtt import (  # noqa: F401 - the round trip times, as stats named them
    PERCENTILES,
    RTT_FIELD_PREFIX,
    percentile,
    rtt_histogram,
    rtt_summary,
)
from tracker_core.figures.stats_top import (  # noqa: F401 - the top downloaders' history, as stats named it
    TOP_CHART_HOURS,
    TOP_HISTORY_N,
    TOP_HISTORY_TIERS,
    merged_points,
    stream_points,
    top_chart,
    top_due,
)
from tracker_core.figures.stats_upkeep import (  # noqa: F401 - the chart data's upkeep, as stats named it
    DAY_MS,
    HOUR_MS,
    HOUR_TTL_S,
    MINUTE_MS,
    backlog_items,
    counts_of,
    layout_of,
    record_top_history,
    sample_and_roll_up,
    to_int,
    upkeep,
)
from tracker_core.project.shard_layout import ShardLayout
from tracker_core.scripts.constants import MINUTE_TTL_S, RTT_BOUNDS_S  # noqa: F401 - the scripts' own
from tracker_core.warriors import hq

RATE_WINDOW_MIN = 10  # items/s, bytes/s over the last ten minutes
RECENT_WINDOW_MIN = 60  # "recent" IRSR and RTT
MINUTE_POINTS = 120  # minute chart: the last two hours
HOUR_POINTS = 168  # hour chart: the last week
MIN_GROWTH_WINDOW_MIN = 5  # backlog growth needs samples at least this far apart

# Reclaims are counted by the claim script under these names: items reclaimed at least once
# (counted at their first reclaim) and reclaims handed out (every one).
RECLAIMED_ITEMS_FIELD = "items_reclaimed"
RECLAIMS_SERVED_FIELD = "reclaims_served"


def _flat_to_pairs(flat) -> dict[str, str]:
    if not isinstance(flat, (list, tuple)):
        return {}  # an error reply (a key of another type): no data rather than no page
    return dict(zip(flat[::2], flat[1::2]))


def _hour_rows(hours: dict, minutes: dict) -> list[tuple[int, dict]]:
    """(hour, counts), oldest first: hours not rolled up yet (the current one, the few before
    the roll-up delay) are summed from the minutes held; older ones come from their roll-up."""
    rows = []
    for hour in sorted(hours):
        counts = hours[hour] or _sum_counts(c for m, c in minutes.items() if m // 60 == hour)
        rows.append((hour, counts))
    return rows


def ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _sum_counts(hashes) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in hashes:
        for field, value in counts.items():
            if field != "backlog":
                total[field] = total.get(field, 0) + value
    return total


def month_days(now_ms: int) -> range:
    """Day numbers (days since the epoch, UTC) of the calendar month of NOW_MS, up to today."""
    today = now_ms // DAY_MS
    date = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).date()
    first = (date.replace(day=1) - dt.date(1970, 1, 1)).days
    return range(first, today + 1)


def backlog_trend(samples: list[tuple[int, int]], done_between: int) -> dict:
    """Compare the oldest and newest backlog samples (minute, backlog) of the recent window.

    The backlog grows faster than it drains when it is bigger now than it was, although items
    were done in between: the count-vs-processed check. Returns the growth per second (None
    without two samples far enough apart) and whether to warn.
    """
    if len(samples) < 2 or samples[-1][0] - samples[0][0] < MIN_GROWTH_WINDOW_MIN:
        return {"growth_per_s": None, "growing": False}
    (m0, b0), (m1, b1) = samples[0], samples[-1]
    growth = (b1 - b0) / ((m1 - m0) * 60)
    return {"growth_per_s": growth, "growing": growth > 0 and done_between >= 0 and b1 > 0}


def eta_seconds(backlog: int, items_per_s: float, growth_per_s: float | None) -> float | None:
    """Seconds until the backlog is empty at the current pace; None when it will not drain.

    With a backlog trend the net drain (which includes items still arriving, e.g. backfeed)
    decides; without one, the throughput alone.
    """
    if backlog <= 0:
        return 0.0
    if growth_per_s is not None:
        return backlog / -growth_per_s if growth_per_s < 0 else None
    return backlog / items_per_s if items_per_s > 0 else None


def log_line(entry_id: str, flat: list) -> dict:
    """One entry of the project's log stream as the page shows it."""
    fields = dict(zip(flat[::2], flat[1::2]))
    return {
        "id": entry_id,
        "downloader": fields.get("downloader", ""),
        "items": fields.get("items", "").split("\0"),
        "bytes": to_int(fields.get("bytes")),
        "version": fields.get("version", ""),
        "at": to_int(fields.get("at")),
    }


class StatsReader:
    """Snapshots of projects' statistics over one connection (RawRedis or a topology client)."""

    def __init__(self, conn, layout=None):
        """LAYOUT: project -> its ShardLayout (Engine.layout, cached); else read each time."""
        self.conn = conn
        self.layout = layout or (lambda project: layout_of(conn, project))

    def recent_log(self, project: str, count: int) -> list[dict]:
        """The COUNT newest lines of the log of completed items, newest first (every shard's
        log read, merged by the done's time)."""
        shards = [
            [log_line(entry_id, flat) for entry_id, flat in self.log_entries(k, count)]
            for k in self.layout(project).keys
        ]
        return shards[0] if len(shards) == 1 else stats_shards.newest_lines(shards, count)

    def log_entries(self, k: keyspace.ProjectKeys, count: int) -> list:
        """The COUNT newest entries of one shard's done log (XREVRANGE's reply)."""
        return self.conn.execute_command("XREVRANGE", k.log, "+", "-", "COUNT", count)

    def downloader_total(self, project: str) -> int:
        """How many downloaders ever completed an item (the page's "show all" count); over
        several shards, those of every shard's board, each counted once."""
        keys = self.layout(project).keys
        if len(keys) == 1:
            return self.conn.execute_command("ZCARD", keys[0].downloader_bytes)
        return len({n for k in keys for n in self.conn.execute_command("ZRANGE", k.downloader_bytes, 0, -1)})

    def warriors_online(self) -> int:
        """Warriors (all projects) online: last heartbeat within hq.ONLINE_WITHIN_MS."""
        return hq.online_count(self.conn)

    def _read(self, k: keyspace.ProjectKeys, now_ms: int, chart_range: str) -> dict:
        minute_now = now_ms // MINUTE_MS
        hour_now = now_ms // HOUR_MS
        day = now_ms // DAY_MS
        source, span_s, _ = stats_ranges.RANGES[chart_range]
        minute_points = max(MINUTE_POINTS, span_s // 60 if source == "minute" and span_s else 0)
        minutes = list(range(minute_now - minute_points + 1, minute_now + 1))
        hours = list(range(hour_now - HOUR_POINTS + 1, hour_now + 1))
        days = list(month_days(now_ms))
        commands: list[tuple] = [("HGETALL", k.minute(m)) for m in minutes]
        commands += [("HGETALL", k.hour(h)) for h in hours]
        commands += [
            ("PFCOUNT", k.uniques("downloaders", day)),
            ("PFCOUNT", k.uniques("ips", day)),
            ("PFCOUNT", *(k.uniques("downloaders", d) for d in days)),
            ("PFCOUNT", *(k.uniques("ips", d) for d in days)),
        ]
        commands += self._top_commands(k)
        # The "all" range: the rolled-up days and the whole hourly top-downloaders stream.
        extra = [("HGETALL", k.days), ("XRANGE", k.top_history(TOP_HISTORY_TIERS[1][0]), "-", "+")]
        if source == "day":
            commands += extra
        replies = self.conn.pipeline(commands)
        n_m, n_h = len(minutes), len(hours)
        n_u = n_m + n_h + 4
        n_t = n_u + len(self._top_commands(k))
        all_range = (
            {"days": _flat_to_pairs(replies[n_t]), "hourly_top": stream_points(replies[n_t + 1])}
            if source == "day"
            else {}
        )
        return {
            "all": all_range,
            "minutes": dict(zip(minutes, (counts_of(f) for f in replies[:n_m]))),
            "hours": dict(zip(hours, (counts_of(f) for f in replies[n_m : n_m + n_h]))),
            "uniques": dict(
                zip(
                    ("downloaders_day", "ips_day", "downloaders_month", "ips_month"),
                    (to_int(x) for x in replies[n_m + n_h : n_u]),
                )
            ),
            "top": self._top_points(replies[n_u:n_t]),
        }

    @staticmethod
    def _top_commands(k: keyspace.ProjectKeys) -> list[tuple]:
        """Read the top-downloaders history: every recent point, the newest hourly ones."""
        (recent_s, _, _), (hourly_s, _, _) = TOP_HISTORY_TIERS
        return [
            ("XRANGE", k.top_history(recent_s), "-", "+"),
            ("XREVRANGE", k.top_history(hourly_s), "+", "-", "COUNT", TOP_CHART_HOURS),
        ]

    @staticmethod
    def _top_points(replies) -> dict:
        return {"recent": stream_points(replies[0]), "hourly": stream_points(replies[1])[::-1]}

    def _maintain_top(self, layout: ShardLayout, now_ms: int, top: dict) -> dict:
        """Record a top-downloaders point when one is due (on every shard), so a tracker without
        `tracker maintain` still gets history while someone looks; return the history to chart."""
        (recent_s, _, _), (hourly_s, _, _) = TOP_HISTORY_TIERS
        if not (top_due(top["recent"], recent_s, now_ms) or top_due(top["hourly"], hourly_s, now_ms)):
            return top
        if not sum(record_top_history(self.conn, layout.project, now_ms, k) for k in layout.keys):
            return top
        parts = [self._top_points(self.conn.pipeline(self._top_commands(k))) for k in layout.keys]
        if len(parts) == 1:
            return parts[0]
        return {
            "recent": merged_points([p["recent"] for p in parts], recent_s),
            "hourly": merged_points([p["hourly"] for p in parts], hourly_s),
        }

    def _read_all(self, layout: ShardLayout, now_ms: int, chart_range: str, backlog: int) -> dict:
        """_read over every shard of LAYOUT, each shard's hours rolled up (the backlog sampled on
        the first), merged into one project's (tracker_core.figures.stats_shards)."""
        parts = []
        for index, k in enumerate(layout.keys):
            part = self._read(k, now_ms, chart_range)
            sample_and_roll_up(self.conn, k, now_ms, backlog if index == 0 else None, part["hours"])
            parts.append(part)
        return parts[0] if len(parts) == 1 else stats_shards.merged_read(parts, _sum_counts)

    def snapshot(
        self,
        project: str,
        counts: dict,
        now_ms: int,
        chart_range: str = stats_ranges.DEFAULT_RANGE,
        created_ms: int | None = None,
    ) -> dict:
        """Statistics of PROJECT; COUNTS is Engine.counts(project) (queues, out, counters).

        CHART_RANGE (stats_ranges.RANGES) picks the span of charts["range"]; CREATED_MS (the
        project's settings) is where the "all" range starts."""
        layout = self.layout(project)
        counters = counts["counters"]
        # The backlog the trend and the ETA follow: every item to do, offloaded ones included
        # (census.todo_total, as stats.json's todo_total and backlog_items count them), and out.
        backlog = census.todo_total(counts) + counts["out"]
        data = self._read_all(layout, now_ms, chart_range, backlog)
        minutes, hours = data["minutes"], data["hours"]
        top = data["top"]
        if counts.get("done"):  # nobody has done anything yet: nothing to record
            top = self._maintain_top(layout, now_ms, top)
        minute_now = now_ms // MINUTE_MS
        minutes.setdefault(minute_now, {})["backlog"] = minutes[minute_now].get("backlog", backlog)

        recent = _sum_counts(minutes[m] for m in minutes if m > minute_now - RECENT_WINDOW_MIN)
        window = _sum_counts(minutes[m] for m in minutes if m > minute_now - RATE_WINDOW_MIN)
        window_s = (RATE_WINDOW_MIN - 1) * 60 + (now_ms % MINUTE_MS) / 1000
        items_per_s = window.get("items_done", 0) / window_s
        samples = sorted(
            (m, c["backlog"])
            for m, c in minutes.items()
            if "backlog" in c and m > minute_now - RECENT_WINDOW_MIN
        )
        trend = backlog_trend(samples, recent.get("items_done", 0))
        claimed = counters.get("items_claimed", 0)
        reclaims_served = counters.get(RECLAIMS_SERVED_FIELD, 0)
        return {
            "irsr": ratio(counters.get("requests_served", 0), counters.get("requests", 0)),
            "irsr_recent": ratio(recent.get("requests_served", 0), recent.get("requests", 0)),
            # items_claimed counts fresh claims only; reclaims are counted apart (claim-21.lua).
            "reclaim_rate": ratio(counters.get(RECLAIMED_ITEMS_FIELD, 0), claimed)
            if RECLAIMED_ITEMS_FIELD in counters
            else None,
            "reclaim_serve_rate": ratio(reclaims_served, claimed + reclaims_served)
            if RECLAIMS_SERVED_FIELD in counters
            else None,
            "rtt": rtt_summary(counters),
            "rtt_recent": rtt_summary(recent),
            "items_per_s": items_per_s,
            "bytes_per_s": window.get("bytes_done", 0) / window_s,
            "requests_per_s": window.get("requests", 0) / window_s,
            "backlog": backlog,
            "backlog_growth_per_s": trend["growth_per_s"],
            "backlog_growing": trend["growing"],
            "eta_s": eta_seconds(backlog, items_per_s, trend["growth_per_s"]),
            "uniques": data["uniques"],
            "charts": {
                **self._charts(minutes, hours, counts["done"], top),
                "range": self._range_chart(chart_range, data, counts["done"], top, now_ms, created_ms),
            },
        }

    def _range_chart(
        self, name: str, data: dict, done_total: int, top: dict, now_ms: int, created_ms: int | None
    ) -> dict:
        """charts["range"]: the counters of range NAME, and the top downloaders over it."""
        source, span_s, step_s = stats_ranges.RANGES[name]
        now_s = now_ms // 1000
        if span_s is not None:  # the minute and hour sources; the day source ("all") has no span
            start = now_s - span_s
            if source == "minute":
                rows = [(m * 60, c) for m, c in sorted(data["minutes"].items()) if m * 60 > start]
            else:
                rows = [(h * 3600, c) for h, c in _hour_rows(data["hours"], data["minutes"])]
        else:
            today = now_ms // DAY_MS
            days = data["all"]["days"]
            first = stats_ranges.first_day(created_ms, days, today)
            step_s = stats_ranges.step_for(today - first + 1)
            hours = dict(_hour_rows(data["hours"], data["minutes"]))
            rows = stats_ranges.day_rows(days, hours, first, today)
            start = first * 86_400
        chart = stats_ranges.range_chart(name, stats_ranges.bucketed(rows, step_s), step_s, done_total)
        if source == "day":
            hourly = data["all"]["hourly_top"]
        else:
            hourly = top["hourly"]
        recent = [p for p in top["recent"] if p[0] >= start * 1000]
        hourly = [p for p in hourly if p[0] >= start * 1000]
        top_range = top_chart(recent, hourly)
        keep = stats_ranges.thin(list(range(len(top_range["t"]))))
        if len(keep) < len(top_range["t"]):
            top_range = {
                "t": [top_range["t"][i] for i in keep],
                "series": {n: [v[i] for i in keep] for n, v in top_range["series"].items()},
            }
        chart["top"] = top_range
        return chart

    def downloader_chart(self, project: str, name: str, now_ms: int) -> dict:
        """DOWNLOADER NAME's cumulative items over time (stats_ranges.downloader_history)."""
        (recent_s, _, _), (hourly_s, _, _) = TOP_HISTORY_TIERS
        parts = [
            self.conn.pipeline(
                [
                    ("XREVRANGE", k.log, "+", "-", "COUNT", stats_ranges.DOWNLOADER_LOG_LINES),
                    ("HGET", k.downloader_count, name),
                    ("ZSCORE", k.downloader_bytes, name),
                    ("XRANGE", k.top_history(hourly_s), "-", "+"),
                    ("XRANGE", k.top_history(recent_s), "-", "+"),
                ]
            )
            for k in self.layout(project).keys
        ]
        logs, items, nbytes, hourly, recent = zip(*parts)
        if len(parts) == 1:
            log = logs[0] if isinstance(logs[0], list) else []
        else:
            log = stats_shards.newest_entries(list(logs), stats_ranges.DOWNLOADER_LOG_LINES)
        recent_points = merged_points([stream_points(x) for x in recent], recent_s)
        cutoff = recent_points[0][0] if recent_points else math.inf
        hourly_points = merged_points([stream_points(x) for x in hourly], hourly_s)
        top_points = [p for p in hourly_points if p[0] < cutoff] + recent_points
        history = stats_ranges.downloader_history(
            log, top_points, name, sum(to_int(x) for x in items), now_ms
        )
        history["bytes"] = sum(to_int(float(x)) for x in nbytes if x is not None)
        return history

    @staticmethod
    def _charts(minutes: dict, hours: dict, done_total: int, top: dict) -> dict:
        """Columnar series (uPlot's shape): per minute for two hours, per hour for a week, and
        the top downloaders' items (every ten minutes for two days, hourly the week before)."""
        by_minute = sorted(minutes.items())[-MINUTE_POINTS:]
        minute_chart = {
            "t": [m * 60 for m, _ in by_minute],
            "items_done": [c.get("items_done", 0) for _, c in by_minute],
            "bytes_done": [c.get("bytes_done", 0) for _, c in by_minute],
            "requests": [c.get("requests", 0) for _, c in by_minute],
            "irsr": [ratio(c.get("requests_served", 0), c.get("requests", 0)) for _, c in by_minute],
            "backlog": [c.get("backlog") for _, c in by_minute],
        }
        rows = _hour_rows(hours, minutes)
        items = [c.get("items_done", 0) for _, c in rows]
        cumulative, running = [], done_total - sum(items)
        for n in items:
            running += n
            cumulative.append(max(running, 0))
        hour_chart = {
            "t": [h * 3600 for h, _ in rows],
            "items_done": items,
            "bytes_done": [c.get("bytes_done", 0) for _, c in rows],
            "done_total": cumulative,
        }
        return {
            "minute": minute_chart,
            "hour": hour_chart,
            "top_downloaders": top_chart(top["recent"], top["hourly"]),
        }
