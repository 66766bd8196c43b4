"""GET /metrics: every project's counters and gauges in the Prometheus text format.

Counters are the scripts' own (requests by outcome, items, bytes, RTT histogram), so rates come
from Prometheus's rate(); gauges are queue sizes (offloaded queue tails as queue="offloaded")
and the to-do total, both from the one census (tracker_core.census through Engine.counts, as
stats.json, the pages and `tracker status` count them), unique visitors and the
warriors online (last heartbeat within hq.ONLINE_WITHIN_MS, all projects). One pipelined round
trip per project; no per-item or per-downloader series, so a scrape stays small however big a
project grows.

Who sees what: a scrape with ``Authorization: Bearer TOKEN``, where TOKEN is the metrics token
(AppConfig.metrics_token, which the CLI takes from ``TRACKER_METRICS_TOKEN``; for Prometheus: it
grants nothing else) or a global admin token, gets every project and the refusals outside
projects; a project admin's token adds its own project. Without a token (HAProxy's health check), only the projects listed for warriors, as
their public leaderboards show them: an unlisted project's name never reaches an anonymous
caller. A token that is sent but wrong is a 401, counted.
"""

from __future__ import annotations

import hmac
import math
import re

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from tracker_api.auth import ANY, Authenticator
from tracker_api.errors import Refused
from tracker_core import census, hq
from tracker_core import keys as keyspace
from tracker_core import stats as stats_mod
from tracker_core.engine import Engine

# Counter fields of a project's stats hash -> (metric name, help). Request outcomes share one
# metric with an outcome label.
REQUEST_OUTCOMES = {
    "requests_served": "served",
    "requests_empty": "empty",
    "requests_limited": "limited",
    "requests_blocked": "blocked",
    "requests_paused": "paused",
    "requests_capped": "capped",
    "requests_outdated": "outdated",
    "requests_claims_limited": "claims_limited",
}
PROJECT_COUNTERS = {
    "items_claimed": ("tracker_items_claimed", "Fresh items handed out (reclaims not included)."),
    "reclaims_served": ("tracker_reclaims_served", "Reclaimed claims handed out again."),
    "items_reclaimed": ("tracker_items_reclaimed", "Items reclaimed at least once."),
    "items_dead": ("tracker_items_dead", "Items sent to dead after too many reclaims."),
    "items_done": ("tracker_items_done", "Items completed (each counted once)."),
    "bytes_done": ("tracker_bytes_done", "Bytes reported by done calls that completed items."),
    "done_requests": ("tracker_done_requests", "Done calls received."),
    "dones_repeated": ("tracker_dones_repeated", "Done calls' names that were already done."),
    "dones_unknown": ("tracker_dones_unknown", "Done calls' names the project never had."),
    "items_dead_done": ("tracker_items_dead_done", "Dead items completed by a late done."),
    "items_unservable": (
        "tracker_items_unservable",
        "Claimed names no client could receive (not UTF-8, NUL), sent to dead.",
    ),
    "log_entries_dropped": (
        "tracker_log_entries_dropped",
        "Done-log entries cut by the stream's safety bound before archiving.",
    ),
}
# Fields of a project's stats hash that count refused input (bad requests, names refused at a
# way in, dones that changed nothing, bounds reached): one metric with a reason label, so a
# refusal added later is exported without a change here.
_REFUSAL_FIELD = re.compile(
    r"(bad_|admin_bad_|admin_too_large|admin_forbidden|admin_conflict)"
    r"|.*(refused|clamped|replaced|dropped|throttled|full)"
)


class TrackerCollector:
    """Read Redis on every scrape (no state in the process, so any worker answers alike).

    VISIBLE(project) says whether the caller may see a project; PRIVATE whether it may see the
    counters outside projects. A collector is built per scrape with the caller's rights.
    """

    def __init__(self, engine: Engine, visible=lambda project: True, private: bool = True):
        self.engine = engine
        self.visible = visible
        self.private = private

    def _projects(self) -> list[str]:
        return sorted(
            name
            for name in self.engine.conn.execute_command("SMEMBERS", keyspace.PROJECTS)
            if self.visible(name)
        )

    def collect(self):
        requests = CounterMetricFamily(
            "tracker_requests", "Item requests by outcome.", labels=["project", "outcome"]
        )
        counters = {
            field: CounterMetricFamily(name, text, labels=["project"])
            for field, (name, text) in PROJECT_COUNTERS.items()
        }
        queue = GaugeMetricFamily(
            "tracker_queue_items", "Items waiting, by queue.", labels=["project", "queue"]
        )
        todo_items = GaugeMetricFamily(
            "tracker_todo_items", "Items to do: every queue, offloaded tails included.", labels=["project"]
        )
        out = GaugeMetricFamily("tracker_items_out", "Items claimed and not done.", labels=["project"])
        warriors = GaugeMetricFamily(
            "tracker_warriors_online",
            f"Warriors whose last heartbeat is at most {hq.ONLINE_WITHIN_MS // 60_000} min old.",
        )
        uniques = GaugeMetricFamily(
            "tracker_unique_visitors",
            "Unique downloaders and IPs this UTC day and month.",
            labels=["project", "kind", "period"],
        )
        rtt = HistogramMetricFamily(
            "tracker_rtt_seconds", "Claim-to-done time of completed items.", labels=["project"]
        )
        refused = CounterMetricFamily(
            "tracker_refused", "Refused requests outside any project.", labels=["reason"]
        )
        project_refused = CounterMetricFamily(
            "tracker_project_refused",
            "Refused input of a project (requests, entries, dones), by reason.",
            labels=["project", "reason"],
        )
        now_ms = self.engine._now_ms()
        for project in self._projects():
            counts = self.engine.counts(project)
            c = counts["counters"]
            for field, outcome in REQUEST_OUTCOMES.items():
                requests.add_metric([project, outcome], c.get(field, 0))
            for field, family in counters.items():
                family.add_metric([project], c.get(field, 0))
            for field, value in sorted(c.items()):
                if _REFUSAL_FIELD.match(field) and field not in PROJECT_COUNTERS:
                    project_refused.add_metric([project, field], value)
            for name, size in counts["queues"].items():
                queue.add_metric([project, name], size)
            todo_items.add_metric([project], census.todo_total(counts))
            out.add_metric([project], counts["out"])
            for key, value in self._uniques(project, now_ms).items():
                kind, period = key.split("_")
                uniques.add_metric([project, kind, period], value)
            histogram = stats_mod.rtt_histogram(c)
            cumulative, buckets = 0, []
            for bound, count in histogram:
                cumulative += count
                buckets.append(("+Inf" if math.isinf(bound) else f"{bound:g}", cumulative))
            rtt.add_metric([project], buckets, c.get("rtt_sum_ms", 0) / 1000)
        if self.private:
            flat = self.engine.conn.execute_command("HGETALL", keyspace.GLOBAL_STATS)
            for field, value in zip(flat[::2], flat[1::2]):
                refused.add_metric([field], int(value))
        yield requests
        yield from counters.values()
        warriors.add_metric([], hq.online_count(self.engine.conn))
        yield from (queue, todo_items, out, uniques, rtt, project_refused, warriors)
        if self.private:
            yield refused

    def _uniques(self, project: str, now_ms: int) -> dict[str, int]:
        k = self.engine.keys(project)
        day = now_ms // stats_mod.DAY_MS
        days = stats_mod.month_days(now_ms)
        replies = self.engine.conn.pipeline(
            (
                ("PFCOUNT", k.uniques("downloaders", day)),
                ("PFCOUNT", k.uniques("ips", day)),
                ("PFCOUNT", *(k.uniques("downloaders", d) for d in days)),
                ("PFCOUNT", *(k.uniques("ips", d) for d in days)),
            )
        )
        return dict(zip(("downloaders_day", "ips_day", "downloaders_month", "ips_month"), replies))


class MetricsResource:
    def __init__(self, engine: Engine, admin_redis=None, metrics_token: str = ""):
        self.engine = engine
        self.auth = Authenticator(admin_redis) if admin_redis is not None else None
        self.metrics_token = metrics_token.strip()

    def _rights(self, req):
        """(visible, private) for the caller: see the module's docstring."""
        header = req.get_header("Authorization")
        if header is None:
            return self._listed, False
        scheme, _, text = header.partition(" ")
        text = text.strip()
        if scheme.lower() != "bearer" or not text:
            raise Refused(
                401, "metrics token required (Authorization: Bearer TOKEN)", "metrics_unauthenticated"
            )
        if self.metrics_token and hmac.compare_digest(text.encode(), self.metrics_token.encode()):
            return (lambda project: True), True
        if self.auth is None:
            raise Refused(401, "unknown metrics token", "metrics_bad_token")
        token = self.auth.check(text, ANY)  # 401 for an unknown or revoked token
        if token.is_global:
            return (lambda project: True), True
        return (lambda project: token.allows(project) or self._listed(project)), False

    def _listed(self, project: str) -> bool:
        settings = self.engine.settings(project)
        return settings is not None and settings.values.get("warrior_listed", "1") == "1"

    def on_get(self, req, resp):
        visible, private = self._rights(req)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(TrackerCollector(self.engine, visible, private))
        resp.content_type = CONTENT_TYPE_PLAIN_0_0_4  # the format every Prometheus reads
        resp.data = generate_latest(registry)
