"""warrior_seen-2.lua: a known warrior's heartbeat is merged into its record; strangers add nothing."""

import json

from tracker_core import keyspace, scripts


def test_heartbeat_of_a_known_and_an_unknown_warrior(conn, r, now_ms):
    r.hset(keyspace.WARRIORS, "a" * 32, json.dumps({"ip": "192.0.2.1", "registered_ms": 1}))
    beat = json.dumps({"downloader": "alice", "seen_ms": now_ms})
    call = dict(now_ms=now_ms, forget_before_ms=now_ms - 86_400_000, beat=beat, max_record=4096)
    assert scripts.warrior_seen(conn, warrior_id="a" * 32, **call) == scripts.warrior_seen.codes.SEEN
    record = json.loads(r.hget(keyspace.WARRIORS, "a" * 32))
    assert (record["ip"], record["downloader"], record["registered_ms"]) == ("192.0.2.1", "alice", 1)
    assert r.zscore(keyspace.WARRIORS_SEEN, "a" * 32) == now_ms
    assert (
        scripts.warrior_seen(conn, warrior_id="b" * 32, **call) == scripts.warrior_seen.codes.UNKNOWN_WARRIOR
    )
    assert not r.hexists(keyspace.WARRIORS, "b" * 32)
    assert (
        scripts.warrior_seen(conn, warrior_id="a" * 32, **dict(call, max_record=10))
        == scripts.warrior_seen.codes.TOO_LARGE
    )
