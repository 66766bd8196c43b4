"""The engine against a real Redis: claim order and records, limits, done, release, settings refresh."""

import pytest

from support.projects import new_project
from tracker_core.admin import census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.items.engine import MEMORY_GUARD_ENV, Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.constants import DEFAULT_RECLAIM_TTL_S

P = "proj"
K = ProjectKeys(P)


@pytest.fixture
def project(admin):
    return new_project(admin, P)


def add(admin, names, queue="todo"):
    return item_verbs.add(admin, P, names, queue=queue)


def test_claim_visits_queues_in_serve_order(project, admin, engine):
    add(admin, ["redo1"], "redo")
    add(admin, ["sec1"], "secondary")
    add(admin, ["bf1"], "backfeed")
    add(admin, ["main1"], "todo")
    add(admin, ["own1"], "downloader:alice")
    add(admin, ["bob1"], "downloader:bob")
    got = [engine.claim(P, "alice", "10.0.0.1", 1) for _ in range(6)]
    assert got == [
        (200, ["own1"]),
        (200, ["main1"]),
        (200, ["bf1"]),
        (200, ["sec1"]),
        (200, ["redo1"]),
        (404, []),
    ]


def test_multi_claim_spans_queues_and_records_each_claim(project, admin, engine, r, clock):
    add(admin, ["a", "b"])
    add(admin, ["c", "d", "e"], "secondary")
    status, items = engine.claim(P, "alice", "10.0.0.1", 4)
    assert status == 200 and len(items) == 4
    assert set(items[:2]) == {"a", "b"} and set(items[2:]) <= {"c", "d", "e"}
    for item in items:
        assert r.zscore(K.out, item) == int(clock.now * 1000) + DEFAULT_RECLAIM_TTL_S * 1000
        assert r.hget(K.claims, item) == f"alice\t10.0.0.1\t1\t{int(clock.now * 1000)}"
    assert r.hget(K.downloader_claims, "alice") == "4"
    assert r.scard(K.secondary) == 1


def test_claim_picks_at_random_within_a_queue(project, admin, engine):
    add(admin, [f"i{n:03d}" for n in range(200)])
    firsts = {tuple(engine.claim(P, "alice", "ip", 5)[1]) for _ in range(10)}
    # SPOP order is random: ten claims of five from 200 names never all come out sorted.
    assert any(list(batch) != sorted(batch) for batch in firsts)


def test_unknown_project(engine):
    assert engine.claim("nothere", "alice", "ip", 1) == (-1, [])
    assert engine.settings("nothere") is None
    assert engine.done("nothere", "alice", "", ["x"], [], "null") is None


def test_blocked_name_and_ip_get_403(project, admin, engine, r):
    add(admin, ["a", "b"])
    limit_verbs.block(admin, "name:mallory", P)
    limit_verbs.block(admin, "ip:10.6.6.6")["entry"]  # global: copied into every project
    assert engine.claim(P, "mallory", "10.0.0.1", 1) == (403, [])
    assert engine.claim(P, "alice", "10.6.6.6", 1) == (403, [])
    assert r.scard(K.todo) == 2 and r.zcard(K.out) == 0
    limit_verbs.block(admin, "ip:10.6.6.6", remove=True)
    assert engine.claim(P, "alice", "10.6.6.6", 1)[0] == 200
    assert int(r.hget(K.stats, "requests_blocked")) == 2


def test_new_project_copies_global_blocks(admin, engine):
    limit_verbs.block(admin, "name:mallory")
    project_verbs.create(admin, "later")
    item_verbs.add(admin, "later", ["x"])
    assert engine.claim("later", "mallory", "ip", 1) == (403, [])


def test_paused_project_hands_out_nothing(project, admin, engine, r):
    add(admin, ["a"])
    project_verbs.set_settings(admin, P, {"paused": "true"})
    assert engine.claim(P, "alice", "ip", 1) == (404, [])
    project_verbs.set_settings(admin, P, {"paused": "false"})
    assert engine.claim(P, "alice", "ip", 1) == (200, ["a"])


def test_downloader_claim_cap(project, admin, engine):
    add(admin, [f"i{n}" for n in range(10)])
    project_verbs.set_settings(admin, P, {"max_claims_per_downloader": "3"})
    assert len(engine.claim(P, "alice", "ip", 2)[1]) == 2
    status, items = engine.claim(P, "alice", "ip", 5)
    assert status == 200 and len(items) == 1
    assert engine.claim(P, "alice", "ip", 1) == (404, [])
    assert engine.claim(P, "bob", "ip", 1)[0] == 200
    engine.done(P, "alice", "", items, [], "null")
    assert engine.claim(P, "alice", "ip", 5)[0] == 200


def test_rate_limit_spreads_items_evenly(project, admin, engine, clock, r):
    add(admin, [f"i{n}" for n in range(100)])
    project_verbs.set_settings(admin, P, {"rate_limit": "60", "rate_burst": "2"})[
        "settings_age"
    ]  # one item per second
    assert len(engine.claim(P, "alice", "ip", 10)[1]) == 2  # the burst
    assert engine.claim(P, "alice", "ip", 1) == (429, [])
    clock.advance(0.5)
    assert engine.claim(P, "alice", "ip", 1) == (429, [])
    clock.advance(0.5)
    assert len(engine.claim(P, "alice", "ip", 10)[1]) == 1
    clock.advance(10)  # idle time refills only up to the burst
    assert len(engine.claim(P, "alice", "ip", 10)[1]) == 2
    assert int(r.hget(K.stats, "requests_limited")) == 2
    assert r.zcard(K.out) == 5


def test_rate_limit_costs_nothing_when_queue_is_empty(project, admin, engine, clock):
    project_verbs.set_settings(admin, P, {"rate_limit": "60", "rate_burst": "1"})
    assert engine.claim(P, "alice", "ip", 1) == (404, [])
    add(admin, ["a"])
    assert engine.claim(P, "alice", "ip", 1) == (200, ["a"])


def test_done_moves_items_and_counts_once(project, admin, engine, r, clock):
    add(admin, ["a", "b", "c"])
    _, items = engine.claim(P, "alice", "1.2.3.4", 3)
    clock.advance(2)
    result = engine.done(P, "alice", "20240101.01", ["a", "b"], ["data", 200, "warc", 100], '{"h":1}')
    assert (result.new, result.repeated, result.unknown) == (2, 0, 0)
    assert r.smembers(K.done) == {"a", "b"}
    assert r.zrange(K.out, 0, -1) == ["c"] and r.hkeys(K.claims) == ["c"]
    assert r.hget(K.downloader_claims, "alice") == "1"
    assert r.hget(K.downloader_count, "alice") == "2"
    assert r.zscore(K.downloader_bytes, "alice") == 300
    assert r.hget(K.downloader_version, "alice") == "20240101.01"
    assert r.hgetall(K.domain_bytes) == {"data": "200", "warc": "100"}
    assert int(r.hget(K.stats, "rtt_sum_ms")) == 4000 and engine.counts(P)["counters"]["rtt_count"] == 2
    log = r.xrange(K.log)
    assert len(log) == 1 and log[0][1]["items"] == "a\0b" and log[0][1]["id"] == '{"h":1}'
    minute = r.hgetall(K.minute(int(clock.now * 1000) // 60000))
    assert minute["items_done"] == "2" and minute["bytes_done"] == "300"
    # The same done again: answered, nothing counted twice.
    again = engine.done(P, "alice", "20240101.01", ["a", "b"], ["data", 200, "warc", 100], "null")
    assert (again.new, again.repeated) == (0, 2)
    assert r.hget(K.downloader_count, "alice") == "2" and r.zscore(K.downloader_bytes, "alice") == 300
    assert len(r.xrange(K.log)) == 1


def test_partially_repeated_done_shares_bytes(project, admin, engine, r):
    add(admin, ["a", "b"])
    engine.claim(P, "alice", "ip", 2)
    engine.done(P, "alice", "", ["a"], ["data", 100], "null")
    result = engine.done(P, "alice", "", ["a", "b"], ["data", 100], "null")
    assert (result.new, result.repeated) == (1, 1)
    assert r.zscore(K.downloader_bytes, "alice") == 150


def test_done_by_another_downloader_is_attributed_to_the_sender(project, admin, engine, r):
    add(admin, ["a"])
    engine.claim(P, "alice", "ip", 1)
    assert engine.done(P, "bob", "", ["a"], ["data", 10], "null").new == 1
    assert r.hget(K.downloader_count, "bob") == "1" and r.hget(K.downloader_count, "alice") is None
    assert r.hget(K.downloader_claims, "alice") is None


def test_done_for_unknown_name_changes_nothing_but_is_recorded(project, admin, engine, r):
    add(admin, ["a"])
    result = engine.done(P, "alice", "", ["ghost"], ["data", 10], "null")
    assert (result.new, result.unknown) == (0, 1)
    assert not r.sismember(K.done, "ghost") and r.scard(K.done) == 0
    assert r.hget(K.stats, "dones_unknown") == "1"
    assert r.xrange(K.bad_dones)[0][1]["items"] == "ghost"
    assert r.zscore(K.downloader_bytes, "alice") is None


def test_done_for_a_released_item_still_queued_changes_nothing_unless_accepted(project, admin, engine, r):
    add(admin, ["a"])
    engine.claim(P, "alice", "ip", 1)
    engine.release(P, "alice", ["a"])
    result = engine.done(P, "alice", "", ["a"], [], "null")
    assert (result.new, result.refused) == (0, 1)  # given back: a queued item (done-20.lua)
    assert r.sismember(K.todo, "a") and not r.sismember(K.done, "a")
    project_verbs.set_settings(admin, P, {"accept_queued_dones": "true"})
    assert engine.done(P, "alice", "", ["a"], [], "null").new == 1
    assert r.scard(K.todo) == 0 and r.sismember(K.done, "a")


def test_discard_mode_counts_without_keeping(project, admin, engine, r):
    project_verbs.set_settings(admin, P, {"done_mode": "discard"})
    add(admin, ["a", "b"])
    _, items = engine.claim(P, "alice", "ip", 2)
    assert engine.done(P, "alice", "", items, [], "null").new == 2
    assert r.scard(K.done) == 0 and r.hget(K.stats, "items_done") == "2"


def test_release_only_gives_back_own_claims(project, admin, engine, r):
    add(admin, ["a", "b"])
    engine.claim(P, "alice", "ip", 1)
    engine.claim(P, "bob", "ip", 1)
    alice_item = next(i for i in ("a", "b") if r.hget(K.claims, i).startswith("alice"))
    bob_item = ({"a", "b"} - {alice_item}).pop()
    assert engine.release(P, "alice", [alice_item, bob_item]) == 1
    assert r.sismember(K.todo, alice_item) and r.zscore(K.out, bob_item) is not None
    assert r.hget(K.downloader_claims, "alice") is None
    assert engine.release(P, "", [bob_item]) == 1  # an admin release takes any claim
    assert r.scard(K.todo) == 2 and r.zcard(K.out) == 0


def test_item_status(project, admin, engine):
    add(admin, ["a", "b"])
    assert engine.item_status(P, "a") == ("todo", None)
    engine.claim(P, "alice", "ip", 2)
    assert engine.item_status(P, "a") == ("out", "alice")
    engine.done(P, "alice", "", ["a"], [], "null")
    assert engine.item_status(P, "a") == ("done", None)
    assert engine.item_status(P, "zzz") == (None, None)


def test_settings_change_is_seen_on_the_next_call(project, admin, engine):
    add(admin, ["a", "b"])
    assert engine.settings(P).min_version == ""
    project_verbs.set_settings(admin, P, {"min_version": "20240101.01"})
    engine.claim(P, "alice", "ip", 1)  # the reply carries the new settings age
    assert engine.settings(P).min_version == "20240101.01"


def test_upload_targets_active_only_with_downloader_filled_in(project, admin, engine):
    assert engine.upload_target(P, "alice") is None
    project_verbs.set_upload_target(admin, P, "rsync://host/mod/:downloader/", "active")
    project_verbs.set_upload_target(admin, P, "rsync://other/mod/", "inactive")
    engine.claim(P, "alice", "ip", 1)
    assert {engine.upload_target(P, "alice") for _ in range(20)} == {"rsync://host/mod/alice/"}


def test_items_add_skips_names_the_project_already_has(project, admin, engine, r):
    assert add(admin, ["a", "b", "a"]) == {"added": 2, "duplicates": 1}
    engine.claim(P, "alice", "ip", 1)
    claimed = r.zrange(K.out, 0, -1)[0]
    engine.done(P, "alice", "", [claimed], [], "null")
    assert add(admin, ["a", "b", "c"], "secondary") == {"added": 1, "duplicates": 2}
    status = census_verbs.status(admin, P)
    assert status["todo_total"] + status["out"] + status["done"] == 3


def test_memory_guard_share_is_a_keyword_with_the_environment_as_fallback(redis_url, r, monkeypatch):
    # The web app passes its config's share; only an Engine built without it reads
    # TRACKER_MEMORY_GUARD_PERCENT, and without either the core's 90 applies.
    monkeypatch.setenv(MEMORY_GUARD_ENV, "40")
    assert Engine(redis_url, memory_guard_percent=70).memory_guard_percent == 70
    assert Engine(redis_url).memory_guard_percent == 40
    monkeypatch.delenv(MEMORY_GUARD_ENV)
    assert Engine(redis_url).memory_guard_percent == 90
    assert Engine(redis_url, memory_guard_percent=500).memory_guard_percent == 100
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(int(used / 0.6)))  # about 60% used
    try:
        assert Engine(redis_url, memory_guard_percent=50).memory_nearly_full()
        assert not Engine(redis_url, memory_guard_percent=80).memory_nearly_full()
    finally:
        r.config_set("maxmemory", "0")
