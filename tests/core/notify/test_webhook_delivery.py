"""The detector and the deliverer in-process over a real Redis and a receiver on loopback:
signed POSTs, retries with growing gaps, drops past the attempts, redirects refused, two
maintainers delivering each event once, the outbox's bound, clock.off from an offset clock."""

from __future__ import annotations

import time

import pytest

from support.processes import wait_for
from support.webhook_receiver import Receiver
from tracker_core import keyspace
from tracker_core.admin import item_verbs, project_verbs, webhook_verbs
from tracker_core.infra.redis_clock import RedisClock
from tracker_core.notify import outbox
from tracker_core.notify.delivery import Deliverer, DeliveryPolicy, Notifier
from tracker_core.notify.detect import Detector
from tracker_core.notify.events import Thresholds

FAST = DeliveryPolicy(timeout_s=2.0, attempts=5, retry_base_s=0.3, retry_max_s=5.0)


@pytest.fixture
def receiver():
    found = Receiver()
    yield found
    found.stop()


def notifier(admin, holder="node-a", policy=FAST, **thresholds):
    n = Notifier(admin.conn, holder, Thresholds(**thresholds), policy, interval_s=0.05)
    n.start()
    return n


def test_events_arrive_signed_with_their_headers(admin, receiver):
    project_verbs.create(admin, "p")
    hook = webhook_verbs.add(admin, receiver.url, project="p", events=["project.paused", "project.resumed"])
    n = notifier(admin)
    try:
        time.sleep(0.3)  # the detector's first sight of p
        project_verbs.pause(admin, "p")
        assert wait_for(lambda: len(receiver.received) >= 1, 10)
        project_verbs.resume(admin, "p")
        assert wait_for(lambda: len(receiver.received) >= 2, 10)
    finally:
        n.stop()
    paused, resumed = receiver.events()
    assert (paused["event"], resumed["event"], paused["project"], paused["attempt"]) == (
        "project.paused", "project.resumed", "p", 1,
    )  # fmt: skip
    assert receiver.all_signed(hook["secret"]) and not receiver.all_signed("whsec_wrong")
    assert receiver.received[0][1]["X-Tracker-Event"] == "project.paused"
    assert webhook_verbs.list_hooks(admin)["webhooks"][0]["delivered"] == 2


def test_a_receiver_failing_three_times_gets_the_event_once_after_growing_gaps(admin):
    receiver = Receiver(fail_first=3)
    project_verbs.create(admin, "p")
    webhook_verbs.add(admin, receiver.url, events=["project.paused"])
    n = notifier(admin)
    try:
        time.sleep(0.3)
        project_verbs.pause(admin, "p")
        assert wait_for(lambda: len(receiver.received) >= 4, 20)
        time.sleep(1.0)  # nothing more comes
    finally:
        n.stop()
        receiver.stop()
    bodies = receiver.events()
    assert [b["attempt"] for b in bodies] == [1, 2, 3, 4] and len({b["id"] for b in bodies}) == 1
    at = receiver.arrivals("project.paused")
    gaps = [b - a for a, b in zip(at, at[1:])]
    assert gaps[0] >= 0.3 and gaps[0] < gaps[1] < gaps[2], gaps  # 0.3, 0.6, 1.2 s, up to a quarter more
    row = webhook_verbs.list_hooks(admin)["webhooks"][0]
    assert (row["delivered"], row["failures"], row["dropped"], row["last_status"]) == (1, 3, 0, "HTTP 204")
    assert admin.conn.hlen(keyspace.NOTIFY_DELIVERIES) == 0


def test_a_receiver_that_never_answers_is_dropped_after_the_attempts_and_counted(admin):
    receiver = Receiver(hang=True)
    project_verbs.create(admin, "p")
    webhook_verbs.add(admin, receiver.url, events=["project.paused"])
    policy = DeliveryPolicy(timeout_s=0.3, attempts=3, retry_base_s=0.1, retry_max_s=1.0)
    n = notifier(admin, policy=policy)
    try:
        time.sleep(0.3)
        project_verbs.pause(admin, "p")
        assert wait_for(lambda: webhook_verbs.list_hooks(admin)["webhooks"][0]["dropped"] == 1, 20)
        time.sleep(1.0)
    finally:
        n.stop()
        receiver.stop()
    listed = webhook_verbs.list_hooks(admin)
    row = listed["webhooks"][0]
    assert (row["delivered"], row["failures"], row["dropped"]) == (0, 3, 1)
    assert "timeout" in row["last_status"].lower()
    assert len(receiver.received) == 3 and listed["outbox"]["dropped"] == 1
    assert admin.conn.hlen(keyspace.NOTIFY_DELIVERIES) == 0


def test_a_redirect_is_not_followed(admin):
    receiver = Receiver(status=302)
    project_verbs.create(admin, "p")
    webhook_verbs.add(admin, receiver.url, events=["project.paused"])
    n = notifier(admin, policy=DeliveryPolicy(timeout_s=1.0, attempts=1, retry_base_s=0.1))
    try:
        time.sleep(0.3)
        project_verbs.pause(admin, "p")
        assert wait_for(lambda: webhook_verbs.list_hooks(admin)["webhooks"][0]["dropped"] == 1, 10)
    finally:
        n.stop()
        receiver.stop()
    assert "redirects are not followed" in webhook_verbs.list_hooks(admin)["webhooks"][0]["last_status"]
    assert len(receiver.received) == 1


def test_two_maintainers_deliver_each_event_once(admin, receiver):
    project_verbs.create(admin, "p")
    item_verbs.add(admin, "p", ["https://example.com/one"])
    webhook_verbs.add(admin, receiver.url)
    both = [notifier(admin, "node-a"), notifier(admin, "node-b")]
    try:
        time.sleep(0.3)
        for n in range(5):  # each change waited for: a pause undone within a check is not seen
            project_verbs.pause(admin, "p")
            assert receiver.has(2 * n + 1)
            project_verbs.resume(admin, "p")
            assert receiver.has(2 * n + 2)
        time.sleep(1.0)
    finally:
        for n in both:
            n.stop()
    names = [b["event"] for b in receiver.events()]
    assert names == ["project.paused", "project.resumed"] * 5
    assert len({b["id"] for b in receiver.events()}) == 10


def test_the_outbox_at_and_past_its_bound(admin, receiver):
    project_verbs.create(admin, "p")
    for _ in range(2):
        webhook_verbs.add(admin, receiver.url, events=["project.paused"])
    fill = {f"old{i}": "{}" for i in range(outbox.MAX_QUEUED - 1)}
    admin.conn.hset(keyspace.NOTIFY_DELIVERIES, mapping=fill)
    detector = Detector(admin.conn)
    detector.check()
    project_verbs.pause(admin, "p")
    assert [e["event"] for e in detector.check()] == ["project.paused"]
    assert admin.conn.hlen(keyspace.NOTIFY_DELIVERIES) == outbox.MAX_QUEUED  # one of the two in
    assert outbox.figures(admin.conn)["dropped_full"] == 1


def test_clock_off_from_a_node_whose_clock_runs_ahead(admin, receiver):
    hook = webhook_verbs.add(admin, receiver.url, events=["clock.off"])
    ahead = [5.0]
    clock = RedisClock(max_offset_s=0, resync_s=0, wall=lambda: time.time() + ahead[0])
    detector = Detector(admin.conn, Thresholds(clock_off_s=1.0), clock=clock, node="node-a")
    deliverer = Deliverer(admin.conn, "node-a", FAST)
    assert [e["event"] for e in detector.check()] == ["clock.off"]
    assert detector.check() == []  # still off: once
    ahead[0] = 0.8  # under the threshold, not yet under half of it: not re-armed
    detector.check()
    ahead[0] = 1.5
    assert detector.check() == []
    ahead[0] = 0.0
    detector.check()  # re-armed
    ahead[0] = -2.0
    assert [e["data"]["offset_s"] < -1.9 for e in detector.check()] == [True]
    assert deliverer.run_once() == 2
    assert [b["data"]["node"] for b in receiver.events("clock.off")] == ["node-a", "node-a"]
    assert receiver.all_signed(hook["secret"])
