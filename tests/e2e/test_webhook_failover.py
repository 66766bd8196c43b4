"""redis.failover through a real Sentinel group: the detector sees the primary change after the
old one is killed, queues the event once on the promoted replica, and it is delivered."""

from __future__ import annotations

import time

import pytest
import redis

from support.redis_topologies import SentinelGroup
from support.webhook_receiver import Receiver
from tracker_core.admin import webhook_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.notify.delivery import Deliverer, DeliveryPolicy
from tracker_core.notify.detect import Detector

pytestmark = pytest.mark.slow


def test_a_sentinel_failover_is_seen_once_and_delivered(tmp_path):
    group = SentinelGroup(tmp_path / "sentinel").start()
    receiver = Receiver()
    try:
        admin = AdminContext.from_url(group.url())
        hook = webhook_verbs.add(admin, receiver.url, events=["redis.failover"])
        detector = Detector(admin.conn)
        assert detector.check() == []  # the primary, first seen
        assert admin.conn.execute_command("WAIT", 1, 5000) == 1  # the replica holds what was seen
        old = f"127.0.0.1:{group.primary.port}"
        group.crash_primary()
        fired: list = []
        deadline = time.monotonic() + 60
        while not fired and time.monotonic() < deadline:
            try:
                fired = detector.check()
            except redis.RedisError:  # no primary yet
                pass
            time.sleep(0.2)
        assert [(e["event"], e["data"]["before"]) for e in fired] == [("redis.failover", [old])]
        assert fired[0]["data"]["after"] == [f"127.0.0.1:{group.current_primary_port()}"]
        assert detector.check() == []  # once
        assert Deliverer(admin.conn, "node-a", DeliveryPolicy(timeout_s=2)).run_once() == 1
        assert [b["event"] for b in receiver.events()] == ["redis.failover"]
        assert receiver.all_signed(hook["secret"])
    finally:
        receiver.stop()
        group.stop()
