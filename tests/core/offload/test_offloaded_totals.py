"""Offloaded items are still to do: stats.json's to-do total, the backlog trend and the ETA, the
leaderboard page's figures, the front page and /metrics count them as `tracker status` does."""

import re

import pytest

from tracker_core import scripts
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.figures import census, stats
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload.lease import Lease

P = "urls"
K = ProjectKeys(P)
# URL items as the biggest projects queue them: slashes, ?, %, #, spaces, 2-4 KB long.
ITEMS = [
    f"https://example.com/a b/{i}?q=%20{i}&r=/x#frag {i}/" + "p/" * (1000 + i % 1000) for i in range(1000)
]


@pytest.fixture
def project(r, tmp_path, ctx):
    """1,000 URL items: 700 offloaded to 4 segment files, 300 left in todo."""
    project_verbs.create(ctx, P)
    item_verbs.add(ctx, P, ITEMS)
    project_verbs.set_settings(
        ctx, P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "200"}
    )
    return P


def offload_now(r, tmp_path, expected=700):
    assert maintenance.maintain_project(r, P, tmp_path)["offloaded"] == expected


def metric(text: str, name: str, **labels) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}{{{re.escape(wanted)}}} (\S+)$", text, re.M)
    assert found, f"{name}{{{wanted}}} not in /metrics"
    return float(found.group(1))


def test_every_to_do_total_counts_offloaded_items_as_tracker_status_does(
    project, engine, r, web, tmp_path, ctx
):
    offload_now(r, tmp_path)
    status_code, claimed = engine.claim(P, "alice", "10.0.0.1", 5)
    assert status_code == 200 and len(claimed) == 5
    status = census_verbs.status(ctx, P)
    to_do = status["todo_total"] + status["offloaded"]
    assert (status["todo_total"], status["offloaded"], status["out"]) == (295, 700, 5)

    counts = engine.counts(P)
    assert counts["queues"]["offloaded"] == status["offloaded"]
    assert census.todo_total(counts) == to_do
    body = web.simulate_get(f"/{P}/stats.json").json
    assert body["todo_total"] == to_do
    assert body["stats"]["backlog"] == to_do + 5
    # The backlog sample of this minute (the trend's data) and tracker maintain's upkeep agree.
    minute = engine._now_ms() // stats.MINUTE_MS
    assert int(r.hget(K.minute(minute), "backlog")) == to_do + 5
    assert stats.backlog_items(r, K) == stats.backlog_items(engine.conn, K) == to_do + 5

    front = web.simulate_get("/").text
    assert re.search(r"<b>995</b> to do", front.replace("\u202f", "")), front[-2000:]
    text = web.simulate_get("/metrics").text
    assert metric(text, "tracker_queue_items", project=P, queue="offloaded") == 700
    assert metric(text, "tracker_todo_items", project=P) == to_do


def test_a_staged_set_counts_and_done_segments_do_not(project, engine, r, web, tmp_path, ctx):
    project_verbs.set_settings(
        ctx, P, {"offload_high": "0", "done_mode": "offload", "done_offload_high": "10"}
    )
    _, claimed = engine.claim(P, "alice", "10.0.0.1", 50)
    engine.done(P, "alice", "1", claimed, [], "")
    report = maintenance.maintain_project(r, P, tmp_path)
    assert report["done_offloaded"] == 40
    # A maintainer that stopped between staging and committing leaves items in `offloading`.
    lease = Lease(r, K, "node-a")
    assert lease.take()
    reply = scripts.offload_stage(r, K, holder=lease.holder, source="todo", source_key=K.todo, count=30)
    assert reply.code > 0 and len(reply.items) == 30
    status = census_verbs.status(ctx, P)
    assert (status["offloaded"], status["done_offloaded"], status["todo_total"]) == (30, 40, 920)
    assert engine.counts(P)["queues"]["offloaded"] == 30
    assert web.simulate_get(f"/{P}/stats.json").json["todo_total"] == 950


def test_offloading_is_not_progress_for_the_trend_or_the_eta(project, engine, r, web, tmp_path, clock):
    # Items are done steadily, so the ETA has a throughput; the backlog's first sample is taken.
    _, claimed = engine.claim(P, "alice", "10.0.0.1", 20)
    engine.done(P, "alice", "1", claimed, [], "")
    before = web.simulate_get(f"/{P}/stats.json").json["stats"]
    assert before["backlog"] == 980
    clock.advance(stats.MIN_GROWTH_WINDOW_MIN * 60 + 60)
    offload_now(r, tmp_path, 680)  # 680 of the 980 move to files: nothing was done
    after = web.simulate_get(f"/{P}/stats.json").json["stats"]
    assert after["backlog"] == 980
    assert after["backlog_growth_per_s"] == 0 and not after["backlog_growing"]
    assert after["eta_s"] is None  # no net drain over the window: no ETA claimed


def test_todo_total_is_the_sum_of_the_breakdown():
    counts = {
        "queues": {
            "todo": 3,
            "backfeed": 1,
            "secondary": 0,
            "redo": 2,
            "limited": 4,
            "downloader": 5,
            "offloaded": 700,
        }
    }
    assert census.todo_total(counts) == 715
    # Done segments and bookkeeping fields are not to do; an unknown source is a queue (todo).
    segments = {"1": "200", "2": "50", "3": "10", "#next": "3"}
    sources = {"1": "todo", "2": "done", "#staged": "4 backfeed"}
    assert census.offloaded_queued(segments, sources, 7) == 217
    assert census.offloaded_queued(segments, {"#staged": "4 done"}, 7) == 260


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
