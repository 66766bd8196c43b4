"""The census (tracker_core.figures.census): every item of a project counted in exactly one place, the
same by every view: `tracker status`, Engine.counts (stats.json, /metrics) and segment listings."""

import pytest

from support.projects import new_project
from tracker_core.admin import census_verbs, item_verbs, project_verbs, segment_verbs
from tracker_core.figures import census
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance

P = "where"
K = ProjectKeys(P)
NAMES = [f"https://example.com/{i}/a b?c=%2F{i}#x" for i in range(60)]


@pytest.fixture
def project(admin):
    return new_project(admin, P)


def test_every_item_is_counted_once_wherever_it_is(admin, project, r, engine, tmp_path):
    item_verbs.add(admin, P, NAMES[:30])
    item_verbs.add(admin, P, NAMES[30:40], queue="backfeed")
    item_verbs.add(admin, P, NAMES[40:45], queue="downloader:alice")
    item_verbs.add(admin, P, NAMES[45:], queue="secondary")
    engine.claim(P, "bob", "10.0.0.1", 3)
    project_verbs.set_settings(
        admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}
    )
    maintenance.maintain_project(r, P, tmp_path)

    status = census_verbs.status(admin, P)
    counts = engine.counts(P)
    queued = status["todo_total"] + status["offloaded"]
    assert queued + status["out"] == len(NAMES)
    assert status["queues"]["downloader"] == {"alice": 5} and status["out"] == 3
    assert status["offloaded"] > 0 and status["segments"] == len(
        segment_verbs.list_segments(admin, P)["segments"]
    )
    # Engine.counts' breakdown sums to the same to-do total (offloaded tails included).
    assert census.todo_total(counts) == queued
    assert counts["queues"]["offloaded"] == status["offloaded"]
    listing = segment_verbs.list_segments(admin, P)
    by_source = {}
    for row in listing["segments"].values():
        by_source[row["source"]] = by_source.get(row["source"], 0) + row["items"]
    assert {s: n for s, n in status["offloaded_queues"].items() if n} == by_source


def test_the_breakdown_caps_downloader_queues_and_the_status_counts_them_all(admin, project, r, engine):
    owners = [f"w{i:04d}" for i in range(census.DOWNLOADER_QUEUES_COUNTED + 5)]
    pipe = r.pipeline(transaction=False)
    for owner in owners:
        pipe.sadd(K.downloader_queues, owner)
        pipe.sadd(K.downloader_queue(owner), f"https://x/{owner}?a#b")
    pipe.execute()
    assert engine.counts(P)["queues"]["downloader"] == census.DOWNLOADER_QUEUES_COUNTED
    status = census_verbs.status(admin, P)
    assert len(status["queues"]["downloader"]) == len(owners)
    assert status["todo_total"] == len(owners)


def test_staged_items_count_under_their_source():
    segments_hash = {"1": "10", "2": "5", "#next": "3"}
    sources = {"1": "backfeed", "2": "done", "#staged": "3 secondary"}
    assert census.offloaded_by_source(segments_hash, sources, 7) == {
        "todo": 0,
        "backfeed": 10,
        "secondary": 7,
        "redo": 0,
        "done": 5,
    }
    assert census.offloaded_queued(segments_hash, sources, 7) == 17
    assert census.segment_table(segments_hash, sources) == {
        1: {"items": 10, "source": "backfeed"},
        2: {"items": 5, "source": "done"},
    }
