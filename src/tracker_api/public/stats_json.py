"""Read-only views: GET /P/stats.json (counts, statistics, charts and leaderboard top N).

Parameters: ``top`` (leaderboard rows), ``range`` (hour, day, week or all: the span of
stats.charts.range, at most stats_ranges.MAX_RANGE_POINTS points) and ``downloader`` (adds that
downloader's own chart, ``downloader_chart``).
"""

from __future__ import annotations

import falcon
import orjson

from tracker_api.web.api_spec import (
    ANY_OBJECT,
    JSON,
    RENDERED_REFUSALS,
    STR,
    Answer,
    declare,
    integer,
    json_answer,
    obj,
    text,
)
from tracker_api.web.errors import Refused
from tracker_core.figures import census, stats_ranges
from tracker_core.figures.stats import StatsReader
from tracker_core.items.engine import Engine
from tracker_core.project.project_links import public_links

DEFAULT_TOP = 100
MAX_TOP = 10000
RECENT_LOG_LINES = 30  # the page's log when it polls (the live feed sends its own)
MAX_DOWNLOADER_NAME = 200  # longer names are no downloader's (the claim refuses them)


def stats_body(
    engine: Engine,
    reader: StatsReader,
    project: str,
    top: int = DEFAULT_TOP,
    chart_range: str = stats_ranges.DEFAULT_RANGE,
    downloader: str | None = None,
) -> dict:
    """Everything the leaderboard shows about PROJECT (stats.json and the live feed's snapshots)."""
    settings = engine.settings(project)
    values = settings.values if settings else {}
    counts = engine.counts(project)
    counters = counts["counters"]
    requests = counters.get("requests", 0)
    rtt_n = counters.get("rtt_count", 0)
    created_ms = stats_ranges.int_or_none(values.get("created_ms"))
    counts.update(
        project=project,
        title=values.get("title") or project,
        # Shown on the page: free text (escaped where shown) and links checked to be http(s).
        description=values.get("description", ""),
        **public_links(values),
        todo_total=census.todo_total(counts),  # offloaded queue tails included
        irsr=(counters.get("requests_served", 0) / requests) if requests else None,
        rtt_mean_s=(counters.get("rtt_sum_ms", 0) / rtt_n / 1000) if rtt_n else None,
        leaderboard=engine.leaderboard(project, top),
        downloaders_total=reader.downloader_total(project),
        stats=reader.snapshot(project, counts, now_ms := engine._now_ms(), chart_range, created_ms),
        recent_log=reader.recent_log(project, RECENT_LOG_LINES),
        # Online: last heartbeat within hq.ONLINE_WITHIN_MS; warriors_active is its old name.
        warriors_online=(online := reader.warriors_online()),
        warriors_active=online,
    )
    if downloader is not None:
        counts["downloader_chart"] = reader.downloader_chart(project, downloader, now_ms)
    return counts


class StatsResource:
    """stats.json, built at most once per second per project and size in each process.

    Viewers poll it while the live feed is down; the cache keeps a crowd of them from costing
    Redis more than one snapshot a second per worker.
    """

    MAX_CACHED = 1000

    def __init__(self, engine: Engine):
        self.engine = engine
        self.reader = StatsReader(engine.conn, engine.layout)
        self.cache: dict[tuple, tuple[int, bytes]] = {}

    @declare(
        "A project's figures: queues, counters, rates, charts, leaderboard",
        query={"top": integer(1, MAX_TOP), "range": STR, "downloader": text(MAX_DOWNLOADER_NAME)},
        answers={
            200: json_answer(ANY_OBJECT),
            # Falcon's own answer to a "top" that is not an integer in range.
            400: Answer("a bad query parameter", {JSON: obj(("title",), title=STR, description=STR)}),
        },
        refuses=(400, *RENDERED_REFUSALS),
    )
    def on_get(self, req, resp, project: str):
        if self.engine.settings(project) is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        top = req.get_param_as_int("top", min_value=1, max_value=MAX_TOP, default=DEFAULT_TOP)
        try:
            chart_range = stats_ranges.range_name(req.get_param("range"))
        except ValueError as exc:
            raise Refused(400, str(exc), "bad_stats_range") from None
        downloader = req.get_param("downloader")
        if downloader is not None and not 0 < len(downloader) <= MAX_DOWNLOADER_NAME:
            raise Refused(400, "downloader must be 1 to 200 characters", "bad_stats_downloader")
        key = (project, top, chart_range, downloader)
        second = self.engine._now_ms() // 1000
        cached = self.cache.get(key)
        if cached is None or cached[0] != second:
            if len(self.cache) >= self.MAX_CACHED:
                self.cache.clear()
            body = stats_body(self.engine, self.reader, project, top, chart_range, downloader)
            cached = (second, orjson.dumps(body))
            self.cache[key] = cached
        resp.content_type = falcon.MEDIA_JSON
        resp.data = cached[1]
