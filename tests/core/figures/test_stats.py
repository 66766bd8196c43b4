"""Statistics: counters kept by claim/done, the stats module, GET /P/stats.json and GET /metrics."""

import math
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.counters import minute_counts, totals
from support.projects import new_project
from tracker_core import scripts
from tracker_core.admin import census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.figures.stats import (
    HOUR_POINTS,
    HOUR_TTL_S,
    MINUTE_POINTS,
    MINUTE_TTL_S,
    RTT_BOUNDS_S,
    TOP_CHART_HOURS,
    TOP_HISTORY_N,
    TOP_HISTORY_TIERS,
    backlog_trend,
    eta_seconds,
    percentile,
    record_top_history,
    rtt_histogram,
    upkeep,
)
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.derived_counters import with_derived

P = "proj"
K = ProjectKeys(P)


@pytest.fixture
def project(admin):
    return new_project(admin, P, [f"item{n}" for n in range(100)])


def stats_json(web, project=P):
    res = web.simulate_get(f"/{project}/stats.json")
    assert res.status_code == 200
    return res.json


def claim_and_done(engine, clock, downloader, n, rtt_s, nbytes=0, ip="10.0.0.1"):
    status, items = engine.claim(P, downloader, ip, n)
    assert status == 200 and len(items) == n
    clock.advance(rtt_s)
    result = engine.done(P, downloader, "1", items, ["data", nbytes], "{}")
    assert result.new == n
    return items


# -- counters kept by the scripts -------------------------------------------------------------


def test_lua_and_python_agree_on_rtt_bounds():
    # The bounds are written once (script_constants) and put into the script as it loads.
    source = scripts.SCRIPTS["done"].source
    bounds = re.search(r"RTT_BOUNDS_S = \{([^}]*)\}", source)[1]
    assert tuple(int(b) for b in bounds.split(",")) == RTT_BOUNDS_S


def test_done_counts_rtt_into_histogram_buckets(engine, clock, project, r):
    minute = int(clock.now * 1000) // 60000
    claim_and_done(engine, clock, "alice", 3, rtt_s=20)  # 20 s -> le 30
    claim_and_done(engine, clock, "alice", 2, rtt_s=4000)  # 4000 s -> le 10800
    claim_and_done(engine, clock, "alice", 1, rtt_s=50000)  # beyond the last bound
    assert "rtt_count" not in r.hgetall(K.stats)
    stats = totals(r, K.stats)
    assert stats["rtt_le_30"] == 3 and stats["rtt_le_10800"] == 2 and stats["rtt_le_inf"] == 1
    assert stats["rtt_count"] == 6
    assert stats["rtt_sum_ms"] == (3 * 20 + 2 * 4000 + 50000) * 1000
    # The minute of the done call has its own histogram (recent percentiles).
    assert minute_counts(r, K.minute(minute))["rtt_le_30"] == 3 and r.ttl(K.minute(minute)) > 0


def test_repeated_done_adds_no_rtt(engine, clock, project, r):
    items = claim_and_done(engine, clock, "alice", 2, rtt_s=10)
    engine.done(P, "alice", "1", items, ["data", 5], "{}")
    assert (
        with_derived({f: int(v) for f, v in r.hgetall(K.stats).items()})["rtt_count"] == 2
        and r.hget(K.stats, "rtt_le_15") == "2"
    )


def test_unique_downloaders_and_ips_per_day_and_month(engine, clock, project, admin, web):
    for name, ip in (
        ("alice", "10.0.0.1"),
        ("bob", "10.0.0.1"),
        ("carol", "10.0.0.2"),
        ("alice", "10.0.0.1"),
    ):
        assert engine.claim(P, name, ip, 1)[0] == 200
    limit_verbs.block(admin, "name:mallory", P)
    assert engine.claim(P, "mallory", "10.0.0.9", 1)[0] == 403
    day = int(clock.now * 1000) // 86_400_000
    uniques = stats_json(web)["stats"]["uniques"]
    assert uniques == {"downloaders_day": 3, "ips_day": 2, "downloaders_month": 3, "ips_month": 2}
    clock.advance(86400)  # 2023-11-15: same month, a new day
    assert engine.claim(P, "dave", "10.0.0.3", 1)[0] == 200
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    uniques = stats_json(web)["stats"]["uniques"]
    assert uniques == {"downloaders_day": 2, "ips_day": 2, "downloaders_month": 4, "ips_month": 3}
    assert 0 < engine.conn.execute_command("TTL", K.uniques("ips", day)) <= 62 * 86400
    clock.advance(16 * 86400)  # December: a new month counts afresh
    assert engine.claim(P, "erin", "10.0.0.4", 1)[0] == 200
    uniques = stats_json(web)["stats"]["uniques"]
    assert uniques["downloaders_month"] == 1 and uniques["ips_month"] == 1


# -- the stats module -------------------------------------------------------------------------


def test_percentile_interpolates_within_buckets():
    counters = {"rtt_le_5": 10, "rtt_le_15": 10}
    histogram = rtt_histogram(counters)
    assert percentile(histogram, 50) == pytest.approx(5.0)
    assert percentile(histogram, 75) == pytest.approx(10.0)
    assert percentile(histogram, 25) == pytest.approx(3.0)  # bucket 1..5 s
    assert percentile(rtt_histogram({}), 50) is None
    # A percentile in the open top bucket is reported as its floor, not invented.
    assert percentile(rtt_histogram({"rtt_le_inf": 4}), 99) == 43200


def test_irsr_overall_and_recent(engine, clock, project, admin, web):
    for _ in range(3):
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    project_verbs.set_settings(admin, P, {"paused": "1"})
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    stats = stats_json(web)["stats"]
    assert stats["irsr"] == pytest.approx(0.75) and stats["irsr_recent"] == pytest.approx(0.75)
    clock.advance(61 * 60)
    project_verbs.set_settings(admin, P, {"paused": "0"})
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    stats = stats_json(web)["stats"]
    assert stats["irsr"] == pytest.approx(0.8) and stats["irsr_recent"] == pytest.approx(1.0)


def test_rtt_summary_in_stats_json(engine, clock, project, web):
    claim_and_done(engine, clock, "alice", 4, rtt_s=20)
    rtt = stats_json(web)["stats"]["rtt"]
    assert rtt["count"] == 4 and rtt["mean_s"] == pytest.approx(20.0)
    assert 15 <= rtt["p50_s"] <= 30 and rtt["histogram"] == [[30.0, 4]]


def test_items_and_bytes_per_second_over_the_window(engine, clock, project, web):
    claim_and_done(engine, clock, "alice", 10, rtt_s=1, nbytes=5000)
    now_ms = int(clock.now * 1000)
    window_s = 9 * 60 + (now_ms % 60000) / 1000
    stats = stats_json(web)["stats"]
    assert stats["items_per_s"] == pytest.approx(10 / window_s)
    assert stats["bytes_per_s"] == pytest.approx(5000 / window_s)
    clock.advance(11 * 60)  # out of the window
    stats = stats_json(web)["stats"]
    assert stats["items_per_s"] == 0 and stats["eta_s"] is None


def test_eta_from_net_drain_and_warning_when_backlog_grows(engine, clock, project, admin, web):
    first = stats_json(web)["stats"]  # samples the backlog (100) for this minute
    assert first["backlog"] == 100 and first["backlog_growth_per_s"] is None
    clock.advance(10 * 60)
    claim_and_done(engine, clock, "alice", 20, rtt_s=1)
    stats = stats_json(web)["stats"]
    assert stats["backlog"] == 80 and not stats["backlog_growing"]
    growth = (80 - 100) / (10 * 60)
    assert stats["backlog_growth_per_s"] == pytest.approx(growth)
    assert stats["eta_s"] == pytest.approx(80 / -growth)
    # Backfeed outpaces the work: the backlog grows although items are done.
    clock.advance(10 * 60)
    item_verbs.add(admin, P, [f"more{n}" for n in range(200)])
    claim_and_done(engine, clock, "alice", 5, rtt_s=1)
    stats = stats_json(web)["stats"]
    assert stats["backlog"] == 275 and stats["backlog_growing"] and stats["eta_s"] is None


def test_eta_helpers():
    assert eta_seconds(0, 0.0, None) == 0.0
    assert eta_seconds(100, 2.0, None) == 50.0
    assert eta_seconds(100, 0.0, None) is None
    assert eta_seconds(100, 2.0, 1.0) is None
    trend = backlog_trend([(0, 10), (2, 50)], 5)
    assert trend["growth_per_s"] is None  # samples too close together to judge


def test_hours_are_rolled_up_once_and_outlive_the_minutes(engine, clock, project, r, web):
    hour = int(clock.now * 1000) // 3_600_000
    claim_and_done(engine, clock, "alice", 7, rtt_s=2, nbytes=700)
    clock.now = (hour + 1) * 3600 + 5 * 60  # five minutes into the next hour
    stats = stats_json(web)["stats"]
    rolled = r.hgetall(K.hour(hour))
    assert rolled["items_done"] == "7" and rolled["bytes_done"] == "700"
    assert rolled["minutes"] == "1" and 0 < r.ttl(K.hour(hour)) <= HOUR_TTL_S
    # Minute data expires after two days; the hour chart still has the hour.
    for minute in range(hour * 60, hour * 60 + 60):
        r.delete(K.minute(minute))
    chart = stats_json(web)["stats"]["charts"]["hour"]
    assert chart["items_done"][chart["t"].index(hour * 3600)] == 7
    assert chart["done_total"][-1] == 7
    # Written once: a changed minute afterwards does not rewrite the roll-up.
    r.hset(K.minute(hour * 60), "items_done", 99)
    stats_json(web)
    assert r.hget(K.hour(hour), "items_done") == "7"
    assert len(stats["charts"]["minute"]["t"]) == MINUTE_POINTS
    assert len(stats["charts"]["hour"]["t"]) == HOUR_POINTS


def test_backlog_sampled_once_per_minute(engine, clock, project, r, web):
    minute = int(clock.now * 1000) // 60000
    stats_json(web)
    list(engine.claim(P, "alice", "10.0.0.1", 30))
    stats_json(web)  # same minute: the first sample stays
    assert r.hget(K.minute(minute), "backlog") == "100"
    assert 0 < r.ttl(K.minute(minute)) <= MINUTE_TTL_S


def test_stats_json_counts_and_leaderboard(engine, clock, project, web):
    claim_and_done(engine, clock, "alice", 3, rtt_s=5, nbytes=300)
    claim_and_done(engine, clock, "bob", 1, rtt_s=5, nbytes=900)
    body = stats_json(web)
    assert body["done"] == 4 and body["todo_total"] == 96 and body["out"] == 0
    assert body["downloaders_total"] == 2
    assert [row["downloader"] for row in body["leaderboard"]] == ["bob", "alice"]
    assert body["stats"]["reclaim_rate"] is None  # no reclaim counters yet
    assert web.simulate_get("/nope/stats.json").status_code == 404


# -- /metrics ---------------------------------------------------------------------------------


def metric_samples(text):
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_metrics_exposes_counters_gauges_and_rtt_histogram(engine, clock, project, admin, web):
    project_verbs.create(admin, "other")
    claim_and_done(engine, clock, "alice", 3, rtt_s=20, nbytes=1500)
    engine.claim(P, "bob", "10.0.0.2", 2)
    res = web.simulate_get("/metrics")
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/plain")
    samples = metric_samples(res.text)
    lab = (("project", P),)
    assert samples[("tracker_done_reports_total", (("project", P), ("result", "accepted")))] == 3
    assert samples[("tracker_done_bytes_total", lab)] == 1500
    assert samples[("tracker_out_items", lab)] == 2
    assert samples[("tracker_queue_items", (("project", P), ("queue", "todo")))] == 95
    assert samples[("tracker_item_requests_total", (("outcome", "served"), ("project", P)))] == 2
    assert samples[("tracker_rtt_seconds_bucket", (("le", "15"), ("project", P)))] == 0
    assert samples[("tracker_rtt_seconds_bucket", (("le", "30"), ("project", P)))] == 3
    assert samples[("tracker_rtt_seconds_count", lab)] == 3
    assert samples[("tracker_rtt_seconds_sum", lab)] == pytest.approx(60.0)
    assert (
        samples[("tracker_unique_visitors", (("kind", "downloaders"), ("period", "day"), ("project", P)))]
        == 2
    )
    assert samples[("tracker_done_reports_total", (("project", "other"), ("result", "accepted")))] == 0
    assert not math.isnan(samples[("tracker_rtt_seconds_sum", (("project", "other"),))])


def test_metrics_exports_a_projects_refusals_by_reason(engine, clock, project, web):
    # A done for an item still queued changes nothing and is counted (the done rule); a bad
    # downloader name is counted by the API: both reach /metrics under their reason.
    queued = engine.counts(P)["queues"]["todo"]
    engine.done(P, "alice", "1", ["item0"], ["data", 1], "{}")
    res = web.simulate_post(f"/{P}/request", json={"downloader": "x", "api_version": "2"})
    assert res.status_code == 400
    assert engine.counts(P)["queues"]["todo"] == queued
    samples = metric_samples(web.simulate_get("/metrics").text)
    refused = {
        dict(labels)["reason"]: value
        for (name, labels), value in samples.items()
        if name == "tracker_project_refused_total" and dict(labels)["project"] == P
    }
    assert refused.get("dones_refused") == 1
    assert refused.get("bad_downloader") == 1
    assert "items_done" not in refused


def test_stats_json_is_built_at_most_once_a_second(engine, clock, project, web):
    assert stats_json(web)["done"] == 0
    status, items = engine.claim(P, "alice", "10.0.0.1", 2)
    engine.done(P, "alice", "1", items, ["data", 1], "{}")
    assert stats_json(web)["done"] == 0  # same second: the cached body
    assert web.simulate_get(f"/{P}/stats.json?top=5").json["done"] == 2  # another size
    clock.advance(1)
    assert stats_json(web)["done"] == 2


def test_reclaim_rate_and_reclaim_serve_rate(engine, clock, admin, web):
    project_verbs.create(admin, "rec")
    item_verbs.add(admin, "rec", ["a", "b", "c", "d"])
    project_verbs.set_settings(admin, "rec", {"reclaim_ttl_s": "10"})
    assert len(engine.claim("rec", "alice", "10.0.0.1", 4)[1]) == 4
    clock.advance(11)  # every claim is due: four first reclaims
    assert len(engine.claim("rec", "bob", "10.0.0.2", 4)[1]) == 4
    clock.advance(21)  # 10 s x 2 claims: due again, not first ones
    assert len(engine.claim("rec", "carol", "10.0.0.3", 2)[1]) == 2
    counters = engine.counts("rec")["counters"]
    assert (counters["items_claimed"], counters["reclaims_served"], counters["items_reclaimed"]) == (4, 6, 4)
    stats = stats_json(web, "rec")["stats"]
    assert stats["reclaim_rate"] == 1.0  # every item was reclaimed at least once
    assert stats["reclaim_serve_rate"] == pytest.approx(6 / 10)


def test_to_do_total_counts_held_and_downloader_queues(engine, admin, web):
    project_verbs.create(admin, "held")
    limit_verbs.add(admin, "held", "users", "type:user", "1/m")
    item_verbs.add(admin, "held", ["user:a", "user:b", "page:1"])
    item_verbs.add(admin, "held", ["mine-1", "mine-2"], queue="downloader:alice")
    body = stats_json(web, "held")
    assert body["todo_total"] == 5  # 2 held by the limit, 1 free, 2 alice's own
    assert body["todo_total"] == census_verbs.status(admin, "held")["todo_total"]
    assert engine.counts("held")["queues"]["limited"] == 2


# -- the top downloaders' history -------------------------------------------------------------

RECENT_S, HOURLY_S = (tier[0] for tier in TOP_HISTORY_TIERS)


def twelve_downloaders(engine, clock):
    """d00..d11 complete 1..12 items; bytes rank d11 first (the ranking the history keeps)."""
    for n in range(12):
        claim_and_done(engine, clock, f"d{n:02d}", n + 1, rtt_s=1, nbytes=1000 * (n + 1))


def test_top_downloaders_history_recorded_and_served_in_stats_json(engine, clock, project, r, web):
    twelve_downloaders(engine, clock)
    top = stats_json(web)["stats"]["charts"]["top_downloaders"]  # the snapshot takes a point
    assert len(top["t"]) == 1 and abs(top["t"][0] - clock.now) < 1
    assert list(top["series"]) == [f"d{n:02d}" for n in range(11, 1, -1)]  # the top 10 only
    assert top["series"]["d11"] == [12] and top["series"]["d02"] == [3]
    assert r.xlen(K.top_history(RECENT_S)) == 1 and r.xlen(K.top_history(HOURLY_S)) == 1
    assert 0 < r.pttl(K.top_history(RECENT_S)) <= TOP_HISTORY_TIERS[0][2] * 1000
    assert 0 < r.pttl(K.top_history(HOURLY_S)) <= TOP_HISTORY_TIERS[1][2] * 1000

    clock.advance(2)  # same interval: no new point, however many viewers
    claim_and_done(engine, clock, "d11", 5, rtt_s=1, nbytes=10)
    assert len(stats_json(web)["stats"]["charts"]["top_downloaders"]["t"]) == 1
    assert r.xlen(K.top_history(RECENT_S)) == 1

    clock.now = (int(clock.now) // RECENT_S + 1) * RECENT_S + 30  # the next ten minutes
    top = stats_json(web)["stats"]["charts"]["top_downloaders"]
    assert len(top["t"]) == 2 and top["series"]["d11"] == [12, 17]
    assert r.xlen(K.top_history(RECENT_S)) == 2

    # Hourly points older than the ten-minute window come first; the recent ones follow.
    r.delete(K.top_history(RECENT_S))
    clock.now = (int(clock.now) // HOURLY_S + 1) * HOURLY_S + 60  # the next hour
    top = stats_json(web)["stats"]["charts"]["top_downloaders"]
    assert r.xlen(K.top_history(HOURLY_S)) == 2 and r.xlen(K.top_history(RECENT_S)) == 1
    assert top["t"] == sorted(top["t"]) and len(top["t"]) == 2
    assert top["series"]["d11"] == [12, 17]


def test_no_history_before_anything_is_done(engine, clock, project, r, web):
    assert stats_json(web)["stats"]["charts"]["top_downloaders"] == {"t": [], "series": {}}
    assert record_top_history(r, P, int(clock.now * 1000)) == 0
    assert not r.exists(K.top_history(RECENT_S), K.top_history(HOURLY_S))


def test_upkeep_records_history_without_a_viewer(engine, clock, project, r):
    claim_and_done(engine, clock, "alice", 2, rtt_s=1, nbytes=10)
    now_ms = int(clock.now * 1000)
    upkeep(r, P, now_ms)
    upkeep(r, P, now_ms + 60_000)  # the next pass, same ten minutes
    entries = r.xrange(K.top_history(RECENT_S))
    assert len(entries) == 1 and entries[0][1] == {"alice": "2"}
    assert entries[0][0] == f"{now_ms}-0" and r.xlen(K.top_history(HOURLY_S)) == 1


def test_duplicate_and_late_points_are_harmless(engine, clock, project, r):
    claim_and_done(engine, clock, "alice", 2, rtt_s=1, nbytes=10)
    now_ms = int(clock.now * 1000)
    assert record_top_history(r, P, now_ms) == 2
    assert record_top_history(r, P, now_ms) == 0  # same timestamp
    assert record_top_history(r, P, now_ms - 1) == 0  # a writer on a slow clock
    assert record_top_history(r, P, now_ms - 86_400_000) == 0
    assert r.xlen(K.top_history(RECENT_S)) == 1 and r.xlen(K.top_history(HOURLY_S)) == 1


def test_top_history_is_bounded(engine, clock, project, r, web, monkeypatch):
    claim_and_done(engine, clock, "alice", 2, rtt_s=1, nbytes=10)
    start = int(clock.now * 1000)
    kept_recent = TOP_HISTORY_TIERS[0][1]
    for step in range(kept_recent + 12):  # 50 hours of ten-minute points
        assert record_top_history(r, P, start + step * RECENT_S * 1000) >= 1
    assert r.xlen(K.top_history(RECENT_S)) == kept_recent
    assert r.xlen(K.top_history(HOURLY_S)) == (kept_recent + 12) * RECENT_S // HOURLY_S + 1
    clock.now = (start + (kept_recent + 11) * RECENT_S * 1000) / 1000
    top = stats_json(web)["stats"]["charts"]["top_downloaders"]
    assert len(top["t"]) <= kept_recent + TOP_CHART_HOURS
    assert top["t"] == sorted(top["t"]) and len(top["t"]) > kept_recent
    # The hourly stream is capped the same way (a small cap here: 1,440 hours take long).
    monkeypatch.setattr(
        "tracker_core.figures.stats_upkeep.TOP_HISTORY_TIERS", ((RECENT_S, 5, 3600), (HOURLY_S, 3, 7200))
    )
    for step in range(10):
        record_top_history(r, P, start + (100 + step) * HOURLY_S * 1000)
    assert r.xlen(K.top_history(HOURLY_S)) == 3 and r.xlen(K.top_history(RECENT_S)) == 5
    assert r.pttl(K.top_history(HOURLY_S)) <= 7_200_000


def test_top_history_reads_only_the_top_n(engine, clock, project, r):
    for n in range(40):
        engine.conn.execute_command("ZADD", K.downloader_bytes, 1000 + n, f"w{n:02d}")
        engine.conn.execute_command("HSET", K.downloader_count, f"w{n:02d}", n + 1)
    with r.monitor() as monitor:
        upkeep(r, P, int(clock.now * 1000))
        r.echo("top-history-end")
        seen = []
        for command in monitor.listen():
            if "top-history-end" in command["command"]:
                break
            seen.append(command["command"].split(" "))
    touching = [c for c in seen if K.downloader_bytes in c or K.downloader_count in c]
    reads = [c for c in touching if c[0].upper() not in ("EVALSHA", "EVAL")]
    assert [c[0].upper() for c in reads] == ["ZREVRANGE", "HMGET"]
    assert reads[0][2:] == ["0", str(TOP_HISTORY_N - 1)]
    assert sorted(reads[1][2:]) == [f"w{n:02d}" for n in range(30, 40)]
    recorded = r.xrange(K.top_history(RECENT_S))[0][1]
    assert recorded == {f"w{n:02d}": str(n + 1) for n in range(30, 40)}


def test_deleting_a_project_removes_its_history(engine, clock, project, admin, r):
    claim_and_done(engine, clock, "alice", 2, rtt_s=1, nbytes=10)
    assert record_top_history(r, P, int(clock.now * 1000)) == 2
    streams = [K.top_history(s) for s, _, _ in TOP_HISTORY_TIERS]
    assert all(r.exists(key) for key in streams)
    project_verbs.delete(admin, P)
    assert not any(r.exists(key) for key in streams)
