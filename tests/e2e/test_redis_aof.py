"""benchmarks/server_bench/redis_aof.py: compacting Redis's AOF before a measured run, with or
without a rewrite of Redis's own under way."""

import time

import pytest
import redis

from server_bench import redis_aof


def test_compact_aof_rewrites_the_aof_and_waits_for_the_rewrite(admin):
    conn = admin.conn
    assert conn.config_get("appendonly") == {"appendonly": "yes"}  # as EmbeddedRedis starts it
    conn.set("bench-aof-filler", "x" * 1000)
    for _ in range(200):
        conn.append("bench-aof-filler", "y" * 1000)  # 200 KB of AOF for a 201 KB value
    before = conn.info("persistence")
    redis_aof.compact_aof(conn)
    after = conn.info("persistence")
    assert after["aof_rewrites"] >= before["aof_rewrites"] + 1
    assert not after["aof_rewrite_in_progress"] and not after["aof_rewrite_scheduled"]
    # One started just before (as the top-up may have): waited for, then done with.
    conn.bgrewriteaof()
    redis_aof.compact_aof(conn)
    persistence = conn.info("persistence")
    assert not persistence["aof_rewrite_in_progress"] and not persistence["aof_rewrite_scheduled"]
    conn.delete("bench-aof-filler")


def test_compact_aof_gives_up_at_its_time_limit(admin):
    with pytest.raises(TimeoutError, match="0 s"):
        redis_aof.compact_aof(admin.conn, timeout_s=0)
    deadline = time.monotonic() + 10
    while admin.conn.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
        time.sleep(0.01)  # leave no rewrite running for the next test


class RewriteStartedMeanwhile:
    """A connection on which a rewrite starts between the check and BGREWRITEAOF: the check
    sees none, BGREWRITEAOF is refused as Redis refuses it, then the real rewrite runs."""

    def __init__(self, conn):
        self.conn, self.checked = conn, False

    def info(self, section):
        if section == "persistence" and not self.checked:
            self.checked = True
            return {"aof_rewrite_in_progress": 0, "aof_rewrite_scheduled": 0}
        return self.conn.info(section)

    def bgrewriteaof(self):
        self.conn.bgrewriteaof()  # Redis's own, started meanwhile
        raise redis.ResponseError("Background append only file rewriting already in progress")


def test_a_rewrite_started_between_the_check_and_the_call_is_waited_for(admin):
    # CI saw it in benchmarks/aof_rewrites.py: loading items at a 1 MB minimum started one.
    before = admin.conn.info("persistence")["aof_rewrites"]
    redis_aof.compact_aof(RewriteStartedMeanwhile(admin.conn))
    after = admin.conn.info("persistence")
    assert after["aof_rewrites"] == before + 1
    assert not after["aof_rewrite_in_progress"] and not after["aof_rewrite_scheduled"]


def test_another_refusal_is_not_taken_for_a_rewrite_under_way(admin):
    class Refusing(RewriteStartedMeanwhile):
        def bgrewriteaof(self):
            raise redis.ResponseError("ERR something else")

    with pytest.raises(redis.ResponseError, match="something else"):
        redis_aof.compact_aof(Refusing(admin.conn))


class PostponedFor:
    """A connection whose Redis reports an unwritten AOF buffer for its first CALLS reads of INFO
    persistence (as Redis does while it postpones the write behind a slow fsync), then the truth."""

    def __init__(self, conn, calls: int):
        self.conn, self.left = conn, calls

    def info(self, section):
        found = self.conn.info(section)
        if section == "persistence" and self.left > 0:
            self.left -= 1
            found = found | {"aof_buffer_length": 4096, "aof_pending_bio_fsync": 1}
        return found


def test_waiting_for_the_aof_to_be_written_waits_out_a_postponed_buffer(admin):
    postponed = PostponedFor(admin.conn, 5)
    redis_aof.wait_for_aof_written(postponed)
    assert postponed.left == 0  # it read until the buffer was written
    assert admin.conn.info("persistence")["aof_buffer_length"] == 0


def test_waiting_for_the_aof_to_be_written_gives_up_at_its_time_limit(admin):
    with pytest.raises(TimeoutError, match="unwritten AOF buffer"):
        redis_aof.wait_for_aof_written(PostponedFor(admin.conn, 10**6), timeout_s=0.1)
