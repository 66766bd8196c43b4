"""Read-only views: GET /P/stats.json (counts and leaderboard top N)."""
from __future__ import annotations

import falcon
import orjson

from tracker_api.errors import Refused
from tracker_core.engine import Engine

DEFAULT_TOP = 100
MAX_TOP = 10000


class StatsResource:
    def __init__(self, engine: Engine):
        self.engine = engine

    def on_get(self, req, resp, project: str):
        settings = self.engine.settings(project)
        if settings is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        top = req.get_param_as_int("top", min_value=1, max_value=MAX_TOP, default=DEFAULT_TOP)
        counts = self.engine.counts(project)
        counters = counts["counters"]
        requests = counters.get("requests", 0)
        rtt_n = counters.get("rtt_count", 0)
        counts.update(
            project=project,
            title=settings.values.get("title") or project,
            todo_total=sum(counts["queues"].values()),
            irsr=(counters.get("requests_served", 0) / requests) if requests else None,
            rtt_mean_s=(counters.get("rtt_sum_ms", 0) / rtt_n / 1000) if rtt_n else None,
            leaderboard=self.engine.leaderboard(project, top),
        )
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(counts)
