"""tracker_core.infra.redis_clock against a real Redis: Redis's time, carried by a monotonic clock."""

from __future__ import annotations

import pytest
import redis

from support.log_records import captured
from tracker_core.infra.redis_clock import ClockRefused, RedisClock


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def conn(redis_url):
    return redis.Redis.from_url(redis_url)


def redis_now(conn) -> float:
    seconds, micros = conn.time()
    return seconds + micros / 1e6


def test_now_is_redis_time_whatever_the_wall_clock_says(conn):
    clock = RedisClock(max_offset_s=0, wall=lambda: 5.0)
    assert abs(clock.now(conn) - redis_now(conn)) < 1
    assert clock.offset_s < -1.7e9  # a wall clock at 1970 + 5 s
    assert clock.refusal is None  # no bound


def test_time_between_syncs_is_carried_by_the_monotonic_clock(conn):
    ticks = Ticks()
    clock = RedisClock(max_offset_s=0, resync_s=10, monotonic=ticks)
    first = clock.now(conn)
    ticks.now += 9.5  # no sync yet: Redis's time at the sync plus 9.5 s
    assert clock.now(conn) == pytest.approx(first + 9.5, abs=1e-6)
    ticks.now += 1  # due: reads TIME again, which has moved only a little in real time
    assert abs(clock.now(conn) - redis_now(conn)) < 1


def test_past_the_bound_it_refuses_and_serves_again_once_the_clock_is_right(conn):
    ticks, wall = Ticks(), [redis_now(conn) + 3600]
    clock = RedisClock(max_offset_s=60, resync_s=10, wall=lambda: wall[0], monotonic=ticks)
    with captured("tracker.clock") as messages, pytest.raises(ClockRefused) as refused:
        clock.now(conn)
    assert "+3600" in str(refused.value) and "--max-clock-offset" in str(refused.value)
    assert clock.status()["refusal"] == str(refused.value)
    assert any("refusing to serve" in m for m in messages), messages
    wall[0] = redis_now(conn)  # time sync fixed
    ticks.now += 10
    assert abs(clock.now(conn) - redis_now(conn)) < 1
    assert clock.refusal is None


@pytest.mark.parametrize("offset_s, refused", [(59.0, False), (61.0, True)])
def test_the_bound_at_and_past_its_value(conn, offset_s, refused):
    clock = RedisClock(max_offset_s=60, wall=lambda: redis_now(conn) - offset_s)
    if refused:
        with pytest.raises(ClockRefused):
            clock.now(conn)
    else:
        clock.now(conn)
    assert clock.offset_s == pytest.approx(-offset_s, abs=0.5)


def test_a_failed_sync_raises_and_is_tried_again(redis_url):
    conn = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    clock = RedisClock(max_offset_s=60)
    with pytest.raises(redis.exceptions.ConnectionError):
        clock.now(conn)
    good = redis.Redis.from_url(redis_url)
    assert abs(clock.now(good) - redis_now(good)) < 1
