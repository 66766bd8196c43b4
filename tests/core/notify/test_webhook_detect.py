"""What the detector reads of a real project (tracker_core.notify.detect): every shard summed,
refills stalled while segments wait, offloading stuck past offload_high, and the events those
raise over time."""

from __future__ import annotations

import time
from pathlib import Path

from tracker_core import keyspace
from tracker_core.admin import item_verbs, project_verbs, webhook_verbs
from tracker_core.maintainer.maintenance import maintain_project
from tracker_core.notify.detect import Detector, read_project
from tracker_core.notify.events import Thresholds

NAMES = [f"https://example.com/item/{i}?a=b" for i in range(300)]
OFFLOAD = {"offload_high": "100", "offload_low": "50", "offload_segment_items": "50"}


def test_a_sharded_project_is_summed_over_its_shards(admin):
    project_verbs.create(admin, "sharded", shards=3)
    item_verbs.add(admin, "sharded", NAMES)
    seen = read_project(admin.conn, "sharded")
    assert (seen.queued, seen.out, seen.done, seen.paused, seen.stalled, seen.stuck) == (
        300,
        0,
        0,
        False,
        (),
        (),
    )
    assert read_project(admin.conn, "never-made") is None


def test_refills_stalled_and_offloading_stuck(admin, tmp_path: Path):
    project_verbs.create(admin, "off", OFFLOAD)
    item_verbs.add(admin, "off", NAMES)
    assert maintain_project(admin.conn, "off", tmp_path)["offloaded"] == 200
    seen = read_project(admin.conn, "off")
    assert (seen.queued, seen.stalled, seen.stuck) == (300, (), ())
    item_verbs.clear(admin, "off", "todo")  # claims took the queue; no maintainer refills it
    assert read_project(admin.conn, "off").stalled == ("todo",)
    detector = Detector(admin.conn, Thresholds(stall_s=0.2))
    assert detector.check() == [] and not admin.conn.exists(keyspace.NOTIFY_STATE)  # no hook: not read
    webhook_verbs.add(admin, "http://127.0.0.1:9/hook", project="off")
    assert detector.check() == []
    time.sleep(0.25)
    assert [e["event"] for e in detector.check()] == ["refill.stalled"]
    assert detector.check() == []  # once
    item_verbs.add(admin, "off", [f"https://example.com/more/{i}" for i in range(150)])
    assert read_project(admin.conn, "off").stuck == ()  # at offload_high + a segment: a pass's work
    item_verbs.add(admin, "off", ["https://example.com/one-more"])
    assert read_project(admin.conn, "off").stuck == ("todo",)
    assert detector.check() == []  # refills re-armed; stuck only starts
    time.sleep(0.25)
    fired = detector.check()
    assert [(e["event"], e["project"], e["data"]["queues"]) for e in fired] == [
        ("offload.stuck", "off", ["todo"])
    ]


def test_one_detector_reads_the_projects_and_another_takes_over_when_it_stops(admin):
    project_verbs.create(admin, "p")
    webhook_verbs.add(admin, "http://127.0.0.1:9/hook")
    first = Detector(admin.conn, node="node-a", lease_ms=400)
    second = Detector(admin.conn, node="node-b", lease_ms=400)
    assert first.check() == [] and second.check() == []
    project_verbs.pause(admin, "p")
    assert second.check() == []  # not its turn: it checked its own clock only
    assert [e["event"] for e in first.check()] == ["project.paused"]
    project_verbs.resume(admin, "p")
    time.sleep(0.5)  # the first stopped renewing its lease
    assert [e["event"] for e in second.check()] == ["project.resumed"]
    assert first.check() == []
    second.release()
    project_verbs.pause(admin, "p")
    assert [e["event"] for e in first.check()] == ["project.paused"]  # at once
    assert set(admin.conn.hkeys(keyspace.NOTIFY_STATE)) == {
        "project:p",
        "redis:primaries",
        "node:node-a",
        "node:node-b",
    }


def test_backlog_growing_from_real_queues_at_its_threshold(admin):
    project_verbs.create(admin, "grows")
    webhook_verbs.add(admin, "http://127.0.0.1:9/hook", project="grows")
    detector = Detector(admin.conn, Thresholds(backlog_growth=100, backlog_window_s=600))
    item_verbs.add(admin, "grows", NAMES[:50])
    assert detector.check() == []  # first sight: 50 queued
    item_verbs.add(admin, "grows", NAMES[50:149], queue="backfeed")
    assert detector.check() == []  # 99 more
    item_verbs.add(admin, "grows", NAMES[149:150], queue="secondary")
    fired = detector.check()
    assert [(e["event"], e["data"]["from"], e["data"]["to"]) for e in fired] == [("backlog.growing", 50, 150)]
    item_verbs.add(admin, "grows", NAMES[150:])
    assert detector.check() == []  # still the same growth: once


def test_only_the_projects_a_hook_watches_are_read(admin):
    for project in ("watched", "unwatched"):
        project_verbs.create(admin, project)
        item_verbs.add(admin, project, NAMES[:10])
    detector = Detector(admin.conn)

    def read() -> set[str]:
        detector.check()
        return {f for f in admin.conn.hkeys(keyspace.NOTIFY_STATE) if f.startswith("project:")}

    webhook_verbs.add(admin, "http://127.0.0.1:9/a", project="watched")
    assert read() == {"project:watched"}
    webhook_verbs.add(admin, "http://127.0.0.1:9/b", events=["redis.failover", "clock.off"])
    assert read() == {"project:watched"}  # a deployment's events need no project read
    webhook_verbs.add(admin, "http://127.0.0.1:9/c", events=["project.drained"])
    assert read() == {"project:watched", "project:unwatched"}  # a hook for every project
