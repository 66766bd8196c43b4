"""notify_claim-4.lua: due deliveries claimed by one deliverer; expired claims due again."""

from tracker_core import keyspace, scripts


def claim(conn, holder, now_ms, count=10, claim_ms=100):
    return scripts.notify_claim(conn, now_ms=now_ms, holder=holder, claim_ms=claim_ms, count=count)


def test_due_deliveries_go_to_one_holder_and_come_back_when_its_claim_expires(conn, r):
    r.hset(keyspace.NOTIFY_DELIVERIES, mapping={"a": "ra", "b": "rb", "c": "rc"})
    r.zadd(keyspace.NOTIFY_DUE, {"a": 10, "b": 20, "c": 500})
    r.zadd(keyspace.NOTIFY_DUE, {"orphan": 5})  # no record: forgotten
    assert claim(conn, "one", now_ms=100) == [1, "a", "ra", "b", "rb"]
    assert claim(conn, "two", now_ms=150) == [1]  # held by one until 200
    assert r.hget(keyspace.NOTIFY_CLAIMS, "a") == "one" and r.zscore(keyspace.NOTIFY_CLAIMED, "a") == 200
    assert r.zscore(keyspace.NOTIFY_DUE, "orphan") is None
    assert claim(conn, "two", now_ms=200, count=1) == [1, "a", "ra"]  # one's claims expired
    assert r.zscore(keyspace.NOTIFY_DUE, "b") == 200 and r.hget(keyspace.NOTIFY_CLAIMS, "a") == "two"


def test_expired_claims_come_back_at_most_100_a_call(conn, r):
    ids = [f"d{i:03d}" for i in range(101)]
    r.hset(keyspace.NOTIFY_DELIVERIES, mapping={i: "r" for i in ids})
    r.zadd(keyspace.NOTIFY_CLAIMED, {i: 50 for i in ids})  # every claim expired at 50
    r.hset(keyspace.NOTIFY_CLAIMS, mapping={i: "gone" for i in ids})
    assert claim(conn, "one", now_ms=100, count=0) == [1]
    assert r.zcard(keyspace.NOTIFY_DUE) == 100 and r.zcard(keyspace.NOTIFY_CLAIMED) == 1
    claim(conn, "one", now_ms=100, count=0)
    assert r.zcard(keyspace.NOTIFY_DUE) == 101 and r.zcard(keyspace.NOTIFY_CLAIMED) == 0
    assert r.hlen(keyspace.NOTIFY_CLAIMS) == 0
