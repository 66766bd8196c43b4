"""Read-only views: GET /P/stats.json (counts, statistics, charts and leaderboard top N)."""

from __future__ import annotations

import falcon
import orjson

from tracker_api.errors import Refused
from tracker_core import census
from tracker_core.engine import Engine
from tracker_core.stats import StatsReader

DEFAULT_TOP = 100
MAX_TOP = 10000
RECENT_LOG_LINES = 30  # the page's log when it polls (the live feed sends its own)


def stats_body(engine: Engine, reader: StatsReader, project: str, top: int = DEFAULT_TOP) -> dict:
    """Everything the leaderboard shows about PROJECT (stats.json and the live feed's snapshots)."""
    settings = engine.settings(project)
    counts = engine.counts(project)
    counters = counts["counters"]
    requests = counters.get("requests", 0)
    rtt_n = counters.get("rtt_count", 0)
    counts.update(
        project=project,
        title=(settings.values.get("title") if settings else None) or project,
        todo_total=census.todo_total(counts),  # offloaded queue tails included
        irsr=(counters.get("requests_served", 0) / requests) if requests else None,
        rtt_mean_s=(counters.get("rtt_sum_ms", 0) / rtt_n / 1000) if rtt_n else None,
        leaderboard=engine.leaderboard(project, top),
        downloaders_total=reader.downloader_total(project),
        stats=reader.snapshot(project, counts, engine._now_ms()),
        recent_log=reader.recent_log(project, RECENT_LOG_LINES),
        # Online: last heartbeat within hq.ONLINE_WITHIN_MS; warriors_active is its old name.
        warriors_online=(online := reader.warriors_online()),
        warriors_active=online,
    )
    return counts


class StatsResource:
    """stats.json, built at most once per second per project and size in each process.

    Viewers poll it while the live feed is down; the cache keeps a crowd of them from costing
    Redis more than one snapshot a second per worker.
    """

    MAX_CACHED = 1000

    def __init__(self, engine: Engine):
        self.engine = engine
        self.reader = StatsReader(engine.conn)
        self.cache: dict[tuple[str, int], tuple[int, bytes]] = {}

    def on_get(self, req, resp, project: str):
        if self.engine.settings(project) is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        top = req.get_param_as_int("top", min_value=1, max_value=MAX_TOP, default=DEFAULT_TOP)
        second = self.engine._now_ms() // 1000
        cached = self.cache.get((project, top))
        if cached is None or cached[0] != second:
            if len(self.cache) >= self.MAX_CACHED:
                self.cache.clear()
            cached = (second, orjson.dumps(stats_body(self.engine, self.reader, project, top)))
            self.cache[(project, top)] = cached
        resp.content_type = falcon.MEDIA_JSON
        resp.data = cached[1]
