"""GET /metrics: every project's counters and gauges in the Prometheus text format.

Names follow Prometheus's conventions: a ``tracker_`` prefix, base units (seconds, bytes),
``_total`` on counters. Counters are the scripts' own (item requests by outcome, done reports by
result, items, bytes, RTT histogram), so rates come from Prometheus's rate(); gauges are where
items are (queues, offloaded tails, out, dead, done), all from the one census
(tracker_core.figures.census through Engine.counts, as stats.json, the pages and `tracker status` count
them), unique visitors, whether a maintainer holds the project's lease, whether its stored
offload settings could strand items (settings.offload_rules), and the warriors online
(last heartbeat within hq.ONLINE_WITHIN_MS, all projects). Two pipelined round trips per
project; no per-item or per-downloader series, so a scrape stays small however big a project
grows. Redis itself: reachable (``tracker_redis_up``, from a PING on every scrape, whose round
trip is ``tracker_redis_rtt_seconds``) and its memory against maxmemory. With Redis unreachable
a scrape with a token still answers (``tracker_redis_up 0``), while an anonymous one (the load
balancer's health check) is a 503, so the node leaves the pool. Requests to the app
itself (per route, every worker) come from tracker_api.public.request_metrics; the node's own
(Redis reachable, its clock and memory, the build) from node_metrics.py.

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

from tracker_api.public.node_metrics import BuildInfo, RedisProbe, build_labels
from tracker_api.web.api_spec import RENDERED_REFUSALS, declare, text_answer
from tracker_api.web.auth import ANY, Authenticator
from tracker_api.web.errors import Refused
from tracker_core import keyspace
from tracker_core.figures import census, stats
from tracker_core.infra import redis_clock
from tracker_core.items.engine import Engine
from tracker_core.project import settings_schema
from tracker_core.project.shard_layout import summed
from tracker_core.warriors import hq

# Item request outcomes: fields of a project's stats hash -> the outcome label of one counter.
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
# Counter fields of a project's stats hash -> (metric name without _total, help).
PROJECT_COUNTERS = {
    "items_claimed": ("tracker_items_claimed", "Fresh items handed out (reclaims not included)."),
    "reclaims_served": ("tracker_reclaims_served", "Reclaimed claims handed out again."),
    "items_reclaimed": ("tracker_items_reclaimed", "Items reclaimed at least once."),
    "items_dead": ("tracker_items_dead", "Items sent to dead after too many reclaims."),
    "bytes_done": ("tracker_done_bytes", "Bytes reported by done calls for the items they completed."),
    "done_requests": ("tracker_done_calls", "Done calls received (each may report several items)."),
    "items_unservable": (
        "tracker_items_unservable",
        "Claimed names no client could receive (not UTF-8, NUL), sent to dead.",
    ),
    "log_entries_dropped": (
        "tracker_log_entries_dropped",
        "Done-log entries cut by the stream's safety bound before archiving.",
    ),
}
# What the done script (lua/done-20.lua, "The done rules") made of each item name reported done,
# from the counters it bumps: result label -> the counts of a project's stats hash.
DONE_RESULTS = {
    # was out (or queued, with accept_queued_dones on): it is done now
    "accepted": lambda c: c.get("items_done", 0) - c.get("items_dead_done", 0),
    "accepted_dead": lambda c: c.get("items_dead_done", 0),  # a late done for a dead item
    "repeated": lambda c: c.get("dones_repeated", 0),  # already done: nothing changed
    "refused_queued": lambda c: c.get("dones_refused", 0),  # still in a queue: nothing changed
    "unknown": lambda c: c.get("dones_unknown", 0),  # never the project's: nothing changed
}
# Fields of a project's stats hash that count refused input (bad requests, names refused at a
# way in, dones that changed nothing, bounds reached): one metric with a reason label, so a
# refusal added later is exported without a change here.
_REFUSAL_FIELD = re.compile(
    r"(bad_|admin_bad_|admin_too_large|admin_forbidden|admin_conflict)"
    r"|.*(refused|clamped|replaced|dropped|throttled|full)"
)
# The families of a scrape besides PROJECT_COUNTERS, in the order a scrape lists them after
# requests, done_reports and those counters: key -> (type, name, help, labels).
FAMILIES = {
    "requests": (
        CounterMetricFamily,
        "tracker_item_requests",
        "Item requests (/request) by outcome.",
        ["project", "outcome"],
    ),
    "done_reports": (
        CounterMetricFamily,
        "tracker_done_reports",
        "Item names reported done, by what the done rules made of them.",
        ["project", "result"],
    ),
    "queue": (GaugeMetricFamily, "tracker_queue_items", "Items waiting, by queue.", ["project", "queue"]),
    "todo": (
        GaugeMetricFamily,
        "tracker_todo_items",
        "Items to do: every queue, offloaded tails included.",
        ["project"],
    ),
    "out": (GaugeMetricFamily, "tracker_out_items", "Items claimed and not done.", ["project"]),
    "backlog": (
        GaugeMetricFamily,
        "tracker_backlog_items",
        "Items to do and out: the backlog stats.json samples.",
        ["project"],
    ),
    "dead": (
        GaugeMetricFamily,
        "tracker_dead_items",
        "Items reclaimed too often, waiting in dead.",
        ["project"],
    ),
    "offloaded": (
        GaugeMetricFamily,
        "tracker_offloaded_items",
        "Items in segment files (or staged for one), by the queue (or done) they came from.",
        ["project", "source"],
    ),
    "done": (
        GaugeMetricFamily,
        "tracker_done_items",
        "Items done, by where they are kept: the done set, segment files, or only counted.",
        ["project", "storage"],
    ),
    "lease": (
        GaugeMetricFamily,
        "tracker_maintain_lease_held",
        "1 while a `tracker maintain` holds the project's lease, else 0.",
        ["project"],
    ),
    "unsafe": (
        GaugeMetricFamily,
        "tracker_offload_settings_unsafe",
        "1 while the project's stored offload settings could strand offloaded items "
        "(maintain refills with safe stand-ins; `tracker project show` says why), else 0.",
        ["project"],
    ),
    "uniques": (
        GaugeMetricFamily,
        "tracker_unique_visitors",
        "Unique downloaders and IPs this UTC day and month.",
        ["project", "kind", "period"],
    ),
    "rtt": (
        HistogramMetricFamily,
        "tracker_rtt_seconds",
        "Claim-to-done time of completed items.",
        ["project"],
    ),
    "project_refused": (
        CounterMetricFamily,
        "tracker_project_refused",
        "Refused input of a project (requests, entries, dones), by reason.",
        ["project", "reason"],
    ),
    "warriors": (
        GaugeMetricFamily,
        "tracker_warriors_online",
        f"Warriors whose last heartbeat is at most {hq.ONLINE_WITHIN_MS // 60_000} min old.",
        [],
    ),
    "refused": (CounterMetricFamily, "tracker_refused", "Refused requests outside any project.", ["reason"]),
}


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
        f = {key: kind(name, text, labels=labels) for key, (kind, name, text, labels) in FAMILIES.items()}
        counters = {
            field: CounterMetricFamily(name, text, labels=["project"])
            for field, (name, text) in PROJECT_COUNTERS.items()
        }
        try:
            now_ms = self.engine._now_ms()
        except redis_clock.ClockRefused:  # a refusing node still reports, on Redis's time
            now_ms = redis_clock.now_ms(self.engine.conn, checked=False)
        for project in self._projects():
            counts = self.engine.counts(project)
            c = counts["counters"]
            for field, outcome in REQUEST_OUTCOMES.items():
                f["requests"].add_metric([project, outcome], c.get(field, 0))
            for result, counted in DONE_RESULTS.items():
                f["done_reports"].add_metric([project, result], counted(c))
            for field, family in counters.items():
                family.add_metric([project], c.get(field, 0))
            for field, value in sorted(c.items()):
                if _REFUSAL_FIELD.match(field) and field not in PROJECT_COUNTERS:
                    f["project_refused"].add_metric([project, field], value)
            for name, size in counts["queues"].items():
                f["queue"].add_metric([project, name], size)
            f["todo"].add_metric([project], census.todo_total(counts))
            f["out"].add_metric([project], counts["out"])
            f["backlog"].add_metric([project], census.todo_total(counts) + counts["out"])
            places = self._places(project, now_ms)
            for key in ("downloaders_day", "ips_day", "downloaders_month", "ips_month"):
                kind, period = key.split("_")
                f["uniques"].add_metric([project, kind, period], places[key])
            f["dead"].add_metric([project], places["dead"])
            by_source = places["offloaded"]
            for source, n in by_source.items():
                f["offloaded"].add_metric([project, source], n)
            kept, done_offloaded = counts["done_kept"], by_source[census.DONE]
            f["done"].add_metric([project, "kept"], kept)
            f["done"].add_metric([project, "offloaded"], done_offloaded)
            # done_mode=discard: items only counted (never negative, whatever a restore left).
            f["done"].add_metric([project, "counted"], max(0, counts["done"] - kept - done_offloaded))
            f["lease"].add_metric([project], places["lease_held"])
            settings = self.engine.settings(project)
            if settings is not None:  # None: deleted during this scrape
                f["unsafe"].add_metric(
                    [project], int(settings_schema.offload_rules(settings.values).problem is not None)
                )
            histogram = stats.rtt_histogram(c)
            cumulative, buckets = 0, []
            for bound, count in histogram:
                cumulative += count
                buckets.append(("+Inf" if math.isinf(bound) else f"{bound:g}", cumulative))
            f["rtt"].add_metric([project], buckets, c.get("rtt_sum_ms", 0) / 1000)
        if self.private:
            flat = self.engine.conn.execute_command("HGETALL", keyspace.GLOBAL_STATS)
            for field, value in zip(flat[::2], flat[1::2]):
                f["refused"].add_metric([field], int(value))
        f["warriors"].add_metric([], hq.online_count(self.engine.conn))
        if not self.private:
            del f["refused"]  # nothing from outside the projects
        yield from (f.pop("requests"), f.pop("done_reports"))  # then the stats hash's counters
        yield from counters.values()
        yield from f.values()

    def _places(self, project: str, now_ms: int) -> dict:
        """What Engine.counts does not read: unique visitors, dead and offloaded items (by the
        census' own reading of the segment registry) and the lease, in one round trip per shard
        (the uniques and the lease: the first shard's; dead and offloaded: every shard's)."""
        places = [
            self._shard_places(k, now_ms, first=i == 0)
            for i, k in enumerate(self.engine.layout(project).keys)
        ]
        return places[0] if len(places) == 1 else summed(places)

    def _shard_places(self, k, now_ms: int, first: bool) -> dict:
        day = now_ms // stats.DAY_MS
        days = stats.month_days(now_ms)
        # Each shard counts its own downloaders and IPs (disjoint sets): summed over the shards.
        uniques = [
            ("PFCOUNT", k.uniques("downloaders", day)),
            ("PFCOUNT", k.uniques("ips", day)),
            ("PFCOUNT", *(k.uniques("downloaders", d) for d in days)),
            ("PFCOUNT", *(k.uniques("ips", d) for d in days)),
        ]
        replies = self.engine.conn.pipeline(
            (
                *uniques,
                ("HLEN", k.dead),
                ("HGETALL", k.segments),
                ("HGETALL", k.segment_queues),
                ("SCARD", k.offloading),
                ("EXISTS", k.maintain_lease),
            )
        )
        dead, segments, sources, staged, lease = replies[len(uniques) :]
        return {
            **dict(
                zip(("downloaders_day", "ips_day", "downloaders_month", "ips_month"), replies[: len(uniques)])
            ),
            "dead": int(dead),
            "offloaded": census.offloaded_by_source(
                census._hash(segments), census._hash(sources), int(staged)
            ),
            "lease_held": int(lease) if first else 0,
        }


class MetricsResource:
    def __init__(self, engine: Engine, admin_redis=None, metrics_token: str = "", request_metrics=None):
        self.engine = engine
        self.request_metrics = request_metrics
        self.build = BuildInfo(build_labels())
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

    @declare(
        "Prometheus metrics (a token shows every project)",
        token_optional=True,
        answers={200: text_answer("the metrics, Prometheus text format 0.0.4")},
        refuses=(401, *RENDERED_REFUSALS),
    )
    def on_get(self, req, resp):
        visible, private = self._rights(req)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.build)
        probe = RedisProbe(self.engine.conn)
        registry.register(probe)
        unreachable = probe.ping()
        if unreachable is None:
            registry.register(TrackerCollector(self.engine, visible, private))
        elif req.get_header("Authorization") is None:
            # The load balancer's health check (anonymous) must see the node fail: a 503, so a
            # node whose Redis path is broken leaves the pool (ansible's loadbalancer role).
            raise unreachable
        # Prometheus (with its token) gets an answer instead: tracker_redis_up 0 and the
        # requests' figures, so the alert says what is wrong.
        if self.request_metrics is not None:
            self.request_metrics.collect_into(registry)
        resp.content_type = CONTENT_TYPE_PLAIN_0_0_4  # the format every Prometheus reads
        resp.data = generate_latest(registry)
