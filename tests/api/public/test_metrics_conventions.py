"""/metrics by Prometheus's conventions, parsed with prometheus-client's own parser: names, types,
labels, and values equal to what Redis holds."""

from __future__ import annotations

import platform
from importlib import metadata

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from support.counters import totals
from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.compiled import classify, protocol
from tracker_core.items import bloom_plan
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload.lease import Lease

P, HIDDEN = "metrics-proj", "metrics-hidden"
K = ProjectKeys(P)
TOKEN = "metrics-secret-token"


def url(n: int) -> str:
    return f"https://example.com/a b/{n}?q=%2F{n}&x=1#frag"


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams: dict, family: str, sample: str | None = None, **labels) -> float:
    found = [
        s.value
        for s in fams[family].samples
        if s.name == (sample or family) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (family, labels, fams[family].samples)
    return found[0]


@pytest.fixture
def web(engine, admin):
    return testing.TestClient(create_app(engine, config=AppConfig(metrics_token=TOKEN)))


def scrape(web, token: str | None = TOKEN) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    res = web.simulate_get("/metrics", headers=headers)
    assert res.status_code == 200, res.text
    return families(res.text)


def test_every_family_follows_the_naming_conventions(web, admin, engine):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, [url(n) for n in range(3)])
    engine.claim(P, "alice", "10.0.0.1", 1)
    fams = scrape(web)
    for name, family in fams.items():
        assert name.startswith("tracker_"), name
        assert not name.endswith(("_ms", "_milliseconds", "_kb", "_mb")), name  # base units
        for s in family.samples:
            if family.type == "counter":
                assert s.name.endswith(("_total", "_created")), s.name
            else:
                assert not s.name.endswith("_total"), s.name  # _total only on counters
    types = {name: f.type for name, f in fams.items()}
    assert types["tracker_done_bytes"] == types["tracker_done_reports"] == "counter"
    assert types["tracker_item_requests"] == types["tracker_http_requests"] == "counter"
    assert types["tracker_rtt_seconds"] == types["tracker_http_request_duration_seconds"] == "histogram"
    for gauge in (
        "tracker_dead_items",
        "tracker_offloaded_items",
        "tracker_done_items",
        "tracker_queue_items",
        "tracker_backlog_items",
        "tracker_redis_up",
        "tracker_redis_rtt_seconds",
        "tracker_redis_memory_used_bytes",
        "tracker_redis_memory_max_bytes",
        "tracker_maintain_lease_held",
        "tracker_build_info",
    ):
        assert types[gauge] == "gauge", gauge


def test_item_gauges_and_done_results_equal_redis(web, admin, engine, clock, r):
    project_verbs.create(admin, P)
    project_verbs.set_settings(admin, P, {"reclaim_ttl_s": "1", "max_reclaims": "1"})
    # Two items reclaimed too often go dead; a late done completes one of them.
    item_verbs.add(admin, P, [url(0), url(1)])
    assert engine.claim(P, "alice", "10.0.0.1", 2)[0] == 200
    clock.advance(1.5)
    assert engine.claim(P, "bob", "10.0.0.2", 2)[0] == 200
    clock.advance(3)
    assert engine.claim(P, "carol", "10.0.0.3", 2) == (404, [])
    assert r.hlen(K.dead) == 2
    item_verbs.add(admin, P, [url(n) for n in range(2, 10)])
    status, claimed = engine.claim(P, "alice", "10.0.0.1", 4)
    assert status == 200
    clock.advance(20)
    assert engine.done(P, "alice", "1", [*claimed[:3], url(0)], ["data", 4000], "{}").new == 4
    assert engine.done(P, "bob", "1", claimed[:1], ["data", 10], "{}").repeated == 1
    queued = sorted(r.smembers(K.todo))[0]
    assert engine.done(P, "bob", "1", [queued], ["data", 10], "{}").refused == 1
    assert engine.done(P, "bob", "1", ["https://nowhere.example/x y?"], ["data", 10], "{}").unknown == 1

    fams = scrape(web)
    stats = totals(r, K.stats)
    results = {
        s.labels["result"]: s.value
        for s in fams["tracker_done_reports"].samples
        if s.name == "tracker_done_reports_total" and s.labels["project"] == P
    }
    assert results == {"accepted": 3, "accepted_dead": 1, "repeated": 1, "refused_queued": 1, "unknown": 1}
    assert results["accepted"] + results["accepted_dead"] == stats["items_done"]
    assert value(fams, "tracker_done_bytes", "tracker_done_bytes_total", project=P) == stats["bytes_done"]
    assert value(fams, "tracker_done_calls", "tracker_done_calls_total", project=P) == stats["done_requests"]
    assert value(fams, "tracker_dead_items", project=P) == r.hlen(K.dead) == 1
    assert value(fams, "tracker_out_items", project=P) == r.zcard(K.out) == 1
    assert value(fams, "tracker_done_items", project=P, storage="kept") == r.scard(K.done) == 4
    assert value(fams, "tracker_done_items", project=P, storage="offloaded") == 0
    assert value(fams, "tracker_done_items", project=P, storage="counted") == 0
    sources = {s.labels["source"]: s.value for s in fams["tracker_offloaded_items"].samples}
    assert sources == {"todo": 0, "backfeed": 0, "secondary": 0, "redo": 0, "done": 0}
    todo = r.scard(K.todo)
    assert value(fams, "tracker_queue_items", project=P, queue="todo") == todo == 4
    assert value(fams, "tracker_backlog_items", project=P) == todo + r.zcard(K.out)
    served = value(fams, "tracker_item_requests", "tracker_item_requests_total", project=P, outcome="served")
    assert served == stats["requests_served"] == 3


def test_lease_redis_and_build_gauges(web, admin, engine, r):
    project_verbs.create(admin, P)
    fams = scrape(web)
    assert value(fams, "tracker_maintain_lease_held", project=P) == 0
    assert Lease(r, K).take()
    fams = scrape(web)
    assert value(fams, "tracker_maintain_lease_held", project=P) == 1
    assert value(fams, "tracker_redis_up") == 1
    assert 0 < value(fams, "tracker_redis_rtt_seconds") < 1
    assert value(fams, "tracker_redis_memory_used_bytes") > 0
    assert value(fams, "tracker_redis_memory_max_bytes") == int(r.config_get("maxmemory")["maxmemory"])
    (info,) = fams["tracker_build_info"].samples
    compiled = all(m.COMPILED for m in (classify, protocol, bloom_plan))
    assert info.value == 1
    assert info.labels == {
        "version": metadata.version("tracker"),
        "python": platform.python_version(),
        "compiled": str(compiled).lower(),
    }


def test_an_unlisted_projects_series_stay_hidden_from_anonymous_callers(web, admin):
    project_verbs.create(admin, P)
    project_verbs.create(admin, HIDDEN)
    project_verbs.set_settings(admin, HIDDEN, {"warrior_listed": "0"})
    for token, seen in ((None, {P}), (TOKEN, {P, HIDDEN})):
        fams = scrape(web, token)
        named = {s.labels["project"] for f in fams.values() for s in f.samples if "project" in s.labels}
        assert named == seen


def test_an_unreachable_redis_is_a_gauge_for_prometheus_and_a_503_for_health_checks(admin):
    # A port nothing listens on: Prometheus's scrape still answers, saying Redis is down; the
    # load balancer's anonymous check fails, so the node leaves the pool.
    down = Engine("redis://127.0.0.1:1/0")
    web = testing.TestClient(create_app(down, admin=admin, config=AppConfig(metrics_token=TOKEN)))
    assert web.simulate_get("/metrics").status_code == 503
    res = web.simulate_get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert res.status_code == 200
    fams = families(res.text)
    assert value(fams, "tracker_redis_up") == 0
    assert "tracker_redis_rtt_seconds" not in fams and "tracker_queue_items" not in fams
    assert "tracker_build_info" in fams
