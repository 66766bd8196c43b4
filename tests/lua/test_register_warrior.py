"""register_warrior-3.lua: a warrior joins the registry within its throttle and its size."""

import json

from tracker_core import keyspace, scripts


def register(conn, warrior_id, now_ms, most=10, per_address=10):
    return scripts.register_warrior(
        conn,
        now_ms=now_ms,
        warrior_id=warrior_id,
        record=json.dumps({"ip": "192.0.2.1"}),
        address_key="192.0.2.1",
        forget_before_ms=now_ms - 86_400_000,
        max_warriors=most,
        max_registrations=per_address,
        window_ms=3_600_000,
        seen_ms=now_ms - 1,
    )


def test_register_within_bounds(conn, r, now_ms):
    assert register(conn, "a" * 32, now_ms) == scripts.register_warrior.codes.REGISTERED
    assert json.loads(r.hget(keyspace.WARRIORS, "a" * 32)) == {"ip": "192.0.2.1"}
    assert r.zscore(keyspace.WARRIORS_SEEN, "a" * 32) == now_ms - 1
    assert register(conn, "b" * 32, now_ms, per_address=1) == scripts.register_warrior.codes.THROTTLED
    assert register(conn, "c" * 32, now_ms, most=1) == scripts.register_warrior.codes.REGISTRY_FULL
    assert r.hkeys(keyspace.WARRIORS) == ["a" * 32]
