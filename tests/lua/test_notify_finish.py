"""notify_finish-7.lua: a claimed delivery delivered, retried later or dropped, counted per hook;
a deliverer whose claim expired changes nothing."""

from tracker_core import keyspace, scripts

CODES = scripts.notify_finish.codes
HOOK = "h" * 12


def claimed(r, delivery_id, holder="one"):
    r.hset(keyspace.NOTIFY_DELIVERIES, delivery_id, "{}")
    r.zadd(keyspace.NOTIFY_CLAIMED, {delivery_id: 999})
    r.hset(keyspace.NOTIFY_CLAIMS, delivery_id, holder)


def finish(conn, delivery_id, outcome, holder="one", **more):
    call = dict(
        holder=holder, delivery_id=delivery_id, outcome=outcome, now_ms=50, hook_id=HOOK, status="HTTP 500"
    )
    return scripts.notify_finish(conn, **{**call, **more})


def test_outcomes(conn, r):
    r.hset(keyspace.NOTIFY_HOOKS, HOOK, "{}")
    for delivery_id in ("d", "r", "x"):
        claimed(r, delivery_id)
    assert finish(conn, "r", "retry", retry_ms=700, record='{"attempts": 1}') == CODES.RECORDED
    assert (
        r.zscore(keyspace.NOTIFY_DUE, "r") == 700
        and r.hget(keyspace.NOTIFY_DELIVERIES, "r") == '{"attempts": 1}'
    )
    assert finish(conn, "d", "delivered", status="HTTP 204") == CODES.RECORDED
    assert finish(conn, "x", "dropped") == CODES.RECORDED
    assert r.hkeys(keyspace.NOTIFY_DELIVERIES) == ["r"] and r.zcard(keyspace.NOTIFY_CLAIMED) == 0
    assert r.hlen(keyspace.NOTIFY_CLAIMS) == 0
    stats = r.hgetall(keyspace.NOTIFY_HOOK_STATS)
    assert (stats[HOOK + ":delivered"], stats[HOOK + ":failures"], stats[HOOK + ":dropped"]) == (
        "1",
        "2",
        "1",
    )
    assert stats[HOOK + ":last_status"] == "HTTP 500" and stats[HOOK + ":last_ms"] == "50"
    assert r.hgetall(keyspace.NOTIFY_STATS) == {"delivered": "1", "dropped": "1"}


def test_an_expired_claim_changes_nothing_and_a_removed_hook_moves_no_figures(conn, r):
    claimed(r, "d", holder="two")
    assert finish(conn, "d", "delivered") == CODES.NOT_HOLDER
    assert r.hexists(keyspace.NOTIFY_DELIVERIES, "d") and r.hget(keyspace.NOTIFY_CLAIMS, "d") == "two"
    assert finish(conn, "d", "gone", holder="two") == CODES.RECORDED
    assert r.hlen(keyspace.NOTIFY_HOOK_STATS) == 0 and r.hget(keyspace.NOTIFY_STATS, "gone") == "1"
