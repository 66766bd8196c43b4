"""notify_emit-4.lua: the detector's state and its deliveries written together, only over the
state it read; the outbox bounded."""

import json

from tracker_core import keyspace, scripts

CODES = scripts.notify_emit.codes


def emit(conn, changes, deliveries=(), now_ms=1000, max_queued=10):
    return scripts.notify_emit(
        conn, now_ms=now_ms, max_queued=max_queued, changes=json.dumps(changes), deliveries=list(deliveries)
    )


def test_state_and_deliveries_written_over_what_was_read(conn, r):
    assert emit(conn, {"project:p": [False, '{"busy": true}']}, [("e1.h", "{}")]) == [1, 1]
    assert r.hget(keyspace.NOTIFY_STATE, "project:p") == '{"busy": true}'
    assert (
        r.zscore(keyspace.NOTIFY_DUE, "e1.h") == 1000 and r.hget(keyspace.NOTIFY_DELIVERIES, "e1.h") == "{}"
    )
    # A second detector that read the state before the first wrote it changes nothing.
    assert emit(conn, {"project:p": [False, '{"busy": false}']}, [("e2.h", "{}")]) == CODES.CHANGED
    assert (
        r.hget(keyspace.NOTIFY_STATE, "project:p") == '{"busy": true}' and r.zcard(keyspace.NOTIFY_DUE) == 1
    )
    assert emit(conn, {"project:p": ['{"busy": true}', False]}) == [1, 0]
    assert not r.hexists(keyspace.NOTIFY_STATE, "project:p")


def test_the_outbox_holds_at_most_its_bound_and_counts_the_rest(conn, r):
    rows = [(f"e{i}.h", "{}") for i in range(5)]
    assert emit(conn, {}, rows, max_queued=3) == [1, 3]
    assert r.hlen(keyspace.NOTIFY_DELIVERIES) == 3
    assert (
        r.hget(keyspace.NOTIFY_STATS, "dropped_full") == "2"
        and r.hget(keyspace.NOTIFY_STATS, "queued") == "3"
    )
    assert emit(conn, {}, rows[:1], max_queued=3) == [1, 0]  # queued already: not again, not counted
    assert r.hget(keyspace.NOTIFY_STATS, "dropped_full") == "2"
