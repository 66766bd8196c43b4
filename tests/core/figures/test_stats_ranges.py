"""The leaderboard's chart ranges (stats.json?range=), the per-day roll-up and a downloader's chart."""

import time

import pytest

from support.projects import new_project
from tracker_core.admin import project_verbs
from tracker_core.figures import stats, stats_ranges
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer.maintenance import Maintainer

P = "ranges"
K = ProjectKeys(P)
DAY_MS = 86_400_000


def url(n: int) -> str:
    return f"https://example.com/a b/{n}?q=%20x#frag/{n}"


@pytest.fixture
def project(admin):
    return new_project(admin, P, [url(n) for n in range(200)])


def chart(web, chart_range=None, **params):
    if chart_range:
        params["range"] = chart_range
    res = web.simulate_get(f"/{P}/stats.json", params=params)
    assert res.status_code == 200, res.text
    return res.json


def done(engine, clock, downloader, n, nbytes=600):
    status, items = engine.claim(P, downloader, "10.0.0.1", n)
    assert status == 200 and len(items) == n
    assert engine.done(P, downloader, "1", items, ["data", nbytes], "{}").new == n
    return items


def test_hour_and_day_ranges_come_from_the_minutes(engine, clock, project, web):
    done(engine, clock, "alice", 2)
    clock.advance(3 * 3600)  # three hours later: outside the hour range, inside the day
    done(engine, clock, "alice", 3)
    clock.advance(120)
    done(engine, clock, "bob", 1)
    hour = chart(web, "hour")["stats"]["charts"]["range"]
    assert hour["range"] == "hour" and hour["step_s"] == 60
    assert len(hour["t"]) == 60 and hour["t"] == sorted(hour["t"])
    assert sum(hour["items_done"]) == 4 and hour["done_total"][-1] == 6
    assert max(hour["bytes_per_s"]) == 600 / 60
    day = chart(web, "day")["stats"]["charts"]["range"]
    assert day["step_s"] == 600 and len(day["t"]) <= 145
    assert all(t % 600 == 0 for t in day["t"])
    assert sum(day["items_done"]) == 6 and day["done_total"][-1] == 6
    assert day["done_total"] == sorted(day["done_total"])
    # The default (what the live feed sends): the week, by hour.
    week = chart(web)["stats"]["charts"]["range"]
    assert week["range"] == "week" and week["step_s"] == 3600 and len(week["t"]) == 168


def test_the_all_range_spans_the_project_life_from_the_days_hash(engine, clock, project, web, r):
    today = int(clock.now * 1000) // DAY_MS
    r.hset(K.settings, "created_ms", (today - 40) * DAY_MS + 5000)
    r.hset(K.days, mapping={str(today - 40): "7 7000 9 7 100", str(today - 3): "1 10 2 1 -"})
    done(engine, clock, "alice", 2)
    body = chart(web, "all")
    full = body["stats"]["charts"]["range"]
    assert full["step_s"] == 86_400 and len(full["t"]) == 41
    assert full["t"][0] == (today - 40) * 86_400 and full["t"][-1] == today * 86_400
    assert full["items_done"][0] == 7 and full["items_done"][-4] == 1 and full["items_done"][-1] == 2
    assert full["backlog"][0] == 100 and full["backlog"][-4] is None
    assert full["irsr"][0] == 7 / 9
    assert full["done_total"][-1] == 2  # counted back from the total now, never below zero


def test_a_long_life_is_charted_in_bounded_points(engine, clock, project, web, r):
    today = int(clock.now * 1000) // DAY_MS
    r.hset(K.settings, "created_ms", (today - 3000) * DAY_MS)
    r.hset(K.days, mapping={str(d): "1 1 1 1 5" for d in range(today - 3000, today)})
    full = chart(web, "all")["stats"]["charts"]["range"]
    assert full["step_s"] == 5 * 86_400  # 3001 days in at most 750 points
    assert len(full["t"]) <= stats_ranges.MAX_RANGE_POINTS
    assert sum(full["items_done"]) == 3000


def test_bad_parameters_are_refused_and_counted(project, web, r):
    assert web.simulate_get(f"/{P}/stats.json", params={"range": "year"}).status_code == 400
    assert web.simulate_get(f"/{P}/stats.json", params={"downloader": "x" * 201}).status_code == 400
    assert r.hget("tracker:stats", "bad_stats_range") == "1"
    assert r.hget("tracker:stats", "bad_stats_downloader") == "1"


def test_upkeep_rolls_completed_days_up_once(engine, clock, project, r):
    now_ms = int(clock.now * 1000)
    today = now_ms // DAY_MS
    r.hset(K.settings, "created_ms", (today - 2) * DAY_MS)
    for day in (today - 2, today - 1):
        r.hset(K.hour(day * 24 + 3), mapping={"items_done": 4, "bytes_done": 40, "backlog": 9})
        r.hset(K.hour(day * 24 + 23), "minutes", 0)
    r.hset(K.hour((today - 3) * 24 + 23), "items_done", 99)  # before the project: never read
    stats.upkeep(r, P, now_ms)
    assert r.hgetall(K.days) == {str(today - 2): "4 40 0 0 9", str(today - 1): "4 40 0 0 9"}
    assert stats_ranges.roll_up_days(r, K, now_ms) == 0  # done once


def test_a_downloader_chart_counts_back_from_their_total(engine, clock, project, web):
    first = done(engine, clock, "alice", 2)
    clock.advance(600)
    done(engine, clock, "bob", 5)
    clock.advance(600)
    done(engine, clock, "alice", 3)
    assert all("/" in item for item in first)
    body = chart(web, downloader="alice")
    alice = body["downloader_chart"]
    assert alice["downloader"] == "alice" and alice["items"] == 5 and alice["bytes"] == 1200
    assert alice["t"] == sorted(alice["t"]) and alice["items_total"][-1] == 5
    assert alice["items_total"] == sorted(alice["items_total"])
    assert alice["items_total"][0] == 0 and {2, 5} <= set(alice["items_total"])
    nobody = chart(web, downloader="nobody who ever came")["downloader_chart"]
    assert nobody["items"] == 0 and nobody["items_total"] == [0]
    assert "downloader_chart" not in chart(web)


def test_a_downloader_chart_reaches_back_through_the_top_history(engine, clock, project, web, r):
    done(engine, clock, "alice", 2)
    then_ms = int(clock.now * 1000)
    assert stats.record_top_history(r, P, then_ms) == 2
    r.delete(K.log)  # the log no longer reaches that far back
    clock.advance(3 * 3600)
    done(engine, clock, "alice", 1)
    alice = chart(web, downloader="alice")["downloader_chart"]
    assert alice["t"][0] == pytest.approx(then_ms / 1000) and alice["items_total"][0] == 2
    assert alice["items_total"][-1] == 3


def test_the_maintainer_stats_step_rolls_yesterday_up(project, r, tmp_path):
    today = int(time.time() * 1000) // DAY_MS
    r.hset(K.settings, "created_ms", (today - 1) * DAY_MS)
    r.hset(K.hour((today - 1) * 24 + 5), mapping={"items_done": 6, "bytes_done": 60, "backlog": 3})
    r.hset(K.hour((today - 1) * 24 + 23), "minutes", 0)
    Maintainer(r, tmp_path, "test-holder").pass_once()
    assert r.hget(K.days, str(today - 1)) == "6 60 0 0 3"


def test_thinning_keeps_the_newest_point_and_the_bound():
    points = list(range(2000))
    kept = stats_ranges.thin(points)
    assert len(kept) <= stats_ranges.MAX_RANGE_POINTS and kept[-1] == 1999
    assert kept == sorted(kept) and stats_ranges.thin(points[:10]) == points[:10]


def test_deleting_the_project_deletes_its_days(engine, clock, project, admin, r):
    r.hset(K.days, "19000", "1 1 1 1 -")
    project_verbs.delete(admin, P)
    assert not r.exists(K.days)
