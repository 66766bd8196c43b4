"""A project over several shards on one Redis: where items live, claims that fall through, dones,
releases and backfeed split by shard, project-wide settings and blocks (docs/sharding.md)."""

from __future__ import annotations

import zlib

import pytest

from tracker_core.admin import backfeed_verbs, census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.errors import BadInput
from tracker_core.infra.rawredis import ConnectionLost, OutcomeUnknown
from tracker_core.items import bloom, shard_router
from tracker_core.items.backfeed import Backfeed
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import shard_layout
from tracker_core.project.shard_layout import MAX_SHARDS, ShardLayout

P = "sharded"
URLS = [
    f"https://example.org/page/{i}?q=a%20b&x={i}#frag {i}" + ("/long" * (200 if i % 7 == 0 else 0))
    for i in range(60)
]


@pytest.fixture
def layout(admin):
    project_verbs.create(admin, P, shards=3)
    return admin.layout(P)


def where(r, layout: ShardLayout) -> dict[str, int]:
    """Item -> index of the shard whose todo holds it."""
    found = {}
    for index, k in enumerate(layout.keys):
        for name in r.smembers(k.todo):
            assert name not in found, f"{name} on two shards"
            found[name] = index
    return found


def test_the_tags_are_the_project_s_and_one_per_further_shard(layout):
    assert layout.tags == ("{sharded}", "{sharded.1}", "{sharded.2}")
    assert shard_layout.choose_tags(P, 1) == ["{sharded}"]


@pytest.mark.parametrize("shards", [0, MAX_SHARDS + 1, "3", True, 2.0])
def test_a_shard_count_outside_1_to_the_maximum_is_refused_and_creates_nothing(admin, r, shards):
    with pytest.raises(BadInput, match="shards"):
        project_verbs.create(admin, P, shards=shards)
    assert r.dbsize() == 0


def test_the_maximum_shard_count_is_taken(admin, r):
    project_verbs.create(admin, P, shards=MAX_SHARDS)
    layout = admin.layout(P)
    assert layout.count == MAX_SHARDS
    assert all(r.exists(k.settings) for k in layout.keys)


def test_each_item_lives_on_the_shard_its_name_hashes_to(admin, r, layout):
    assert item_verbs.add(admin, P, URLS)["added"] == len(URLS)
    found = where(r, layout)
    assert found == {u: zlib.crc32(u.encode()) % 3 for u in URLS}
    assert set(found.values()) == {0, 1, 2}
    # Added again: every one is a duplicate, found by its own shard's filter.
    assert item_verbs.add(admin, P, URLS) == {"added": 0, "duplicates": len(URLS)}
    status = census_verbs.status(admin, P)
    assert (status["todo_total"], status["queues"]["todo"], status["project"]) == (len(URLS), len(URLS), P)


def test_claims_fall_through_every_shard_before_a_404(admin, engine, layout, r):
    # Items on one shard only: whichever shard a claim starts at, it finds them.
    on_two = [u for u in URLS if layout.shard_of(u) == 2][:5]
    item_verbs.add(admin, P, on_two)
    got = [engine.claim(P, "alice", "10.0.0.1", 1) for _ in range(len(on_two))]
    assert all(code == 200 and len(names) == 1 for code, names in got)
    assert sorted(n for _, names in got for n in names) == sorted(on_two)
    assert engine.claim(P, "alice", "10.0.0.1", 1) == (404, [])


def test_multi_gathers_from_several_shards_when_one_runs_short(admin, engine, layout):
    item_verbs.add(admin, P, URLS[:9])
    code, names = engine.claim(P, "alice", "10.0.0.1", 9)
    assert code == 200 and sorted(names) == sorted(URLS[:9])
    assert {layout.shard_of(n) for n in names} == {0, 1, 2}


def test_claims_spread_over_the_shards(admin, engine, layout, r):
    item_verbs.add(admin, P, URLS)
    for _ in range(30):
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    per_shard = [r.zcard(k.out) for k in layout.keys]
    assert sum(per_shard) == 30 and min(per_shard) >= 5, per_shard


def test_a_done_splits_by_shard_and_its_bytes_add_up_exactly(admin, engine, layout, r):
    item_verbs.add(admin, P, URLS[:10])
    code, names = engine.claim(P, "alice", "10.0.0.1", 10)
    assert code == 200 and len(names) == 10
    reply = engine.done(P, "alice", "v1", names, ["example.org", 1001], "{}")
    assert (reply.new, reply.repeated, reply.unknown) == (10, 0, 0)
    assert sum(r.scard(k.done) for k in layout.keys) == 10
    assert sum(int(r.hget(k.domain_bytes, "example.org") or 0) for k in layout.keys) == 1001
    again = engine.done(P, "alice", "v1", names, ["example.org", 1001], "{}")
    assert (again.new, again.repeated) == (0, 10)
    board = engine.leaderboard(P, 10)
    assert board == [{"downloader": "alice", "bytes": 1001, "items": 10, "version": "v1"}]
    counts = engine.counts(P)
    assert (counts["done"], counts["out"], counts["domain_bytes"]) == (10, 0, {"example.org": 1001})


def test_a_release_splits_by_shard(admin, engine, layout, r):
    item_verbs.add(admin, P, URLS[:12])
    _, names = engine.claim(P, "alice", "10.0.0.1", 12)
    assert engine.release(P, "alice", names[:7]) == 7
    assert sum(r.zcard(k.out) for k in layout.keys) == 5
    assert engine.release(P, "bob", names[7:]) == 0  # not bob's claims
    assert where(r, layout) == {n: layout.shard_of(n) for n in names[:7]}


def test_item_status_asks_the_item_s_own_shard(admin, engine, layout):
    item_verbs.add(admin, P, URLS[:6])
    _, names = engine.claim(P, "alice", "10.0.0.1", 1)
    assert engine.item_status(P, names[0]) == ("out", "alice")
    waiting = next(u for u in URLS[:6] if u != names[0])
    assert engine.item_status(P, waiting)[0] == "todo"


def test_settings_and_pause_reach_every_shard(admin, engine, layout, r):
    item_verbs.add(admin, P, URLS)
    project_verbs.pause(admin, P)
    assert [r.hget(k.settings, "paused") for k in layout.keys] == ["1", "1", "1"]
    assert engine.claim(P, "alice", "10.0.0.1", 5) == (404, [])
    project_verbs.resume(admin, P)
    project_verbs.set_settings(admin, P, {"max_multi": "7"})
    assert {r.hget(k.settings, "max_multi") for k in layout.keys} == {"7"}
    ages = {r.hget(k.settings, "settings_age") for k in layout.keys}
    assert len(ages) == 1  # changed together, so the nodes' caches follow one age


def test_a_block_reaches_every_shard(admin, engine, layout):
    item_verbs.add(admin, P, URLS)
    limit_verbs.block(admin, "name:mallory", P)
    assert engine.claim(P, "mallory", "10.0.0.9", 5) == (403, [])
    limit_verbs.block(admin, "ip:10.0.0.0/24")  # a global block too
    assert engine.claim(P, "alice", "10.0.0.1", 5) == (403, [])


def test_show_says_where_each_shard_lives(admin, layout):
    shown = project_verbs.show(admin, P)
    assert [s["tag"] for s in shown["shards"]] == list(layout.tags)
    assert shard_layout.SHARD_TAGS_FIELD not in shown["settings"]


def test_delete_removes_every_shard(admin, layout, r):
    item_verbs.add(admin, P, URLS)
    project_verbs.delete(admin, P)
    # Only the audit of the deletion itself stays (as for a one-shard project).
    assert [key for key in r.scan_iter("*") if key.startswith("{sharded")] == ["{sharded}:audit"]


def test_backfeed_splits_by_shard_and_dedups_on_each(admin, engine, layout, r):
    secret = backfeed_verbs.create_secret(admin, P)["secret"]
    feed = Backfeed(engine)
    entries = URLS[:30]
    outcome = feed.submit(P, secret, entries, entries)
    assert (outcome.status, outcome.new, outcome.seen) == (bloom.OK, 30, 0)
    assert sum(r.scard(k.backfeed) for k in layout.keys) == 30
    assert {layout.shard_of(n) for n in r.smembers(layout.keys[1].backfeed)} == {1}
    again = feed.submit(P, secret, entries + URLS[30:32], entries + URLS[30:32])
    assert (again.new, again.seen) == (2, 30)
    assert feed.submit(P, "0" * 32, entries, entries).status == bloom.WRONG_SECRET


def test_a_revoked_backfeed_secret_is_refused_on_every_shard(admin, engine, layout):
    made = backfeed_verbs.create_secret(admin, P)
    backfeed_verbs.revoke_secret(admin, P, made["id"])
    feed = Backfeed(engine)
    for shard in range(3):
        name = next(u for u in URLS if layout.shard_of(u) == shard)
        assert feed.submit(P, made["secret"], [name], [name]).status == bloom.WRONG_SECRET


def test_a_one_shard_project_keeps_today_s_layout(admin, r):
    project_verbs.create(admin, "plain")
    item_verbs.add(admin, "plain", URLS[:3])
    assert admin.layout("plain").tags == ("{plain}",)
    assert r.hget(ProjectKeys("plain").settings, shard_layout.SHARD_TAGS_FIELD) is None
    assert r.scard(ProjectKeys("plain").todo) == 3


def claims_until_refused(engine, downloader="alice") -> tuple[int, int]:
    """(items claimed one at a time until a refusal, the refusal's code)."""
    got = 0
    while True:
        code, names = engine.claim(P, downloader, "10.0.0.1", 1)
        if code != 200:
            return got, code
        got += len(names)


def test_the_project_rate_is_shared_out_over_the_shards(admin, engine, clock, layout, r):
    item_verbs.add(admin, P, URLS)
    project_verbs.set_settings(admin, P, {"rate_limit": "600", "rate_burst": "30"})
    assert {r.hget(k.settings, "shard_share") for k in layout.keys} == {repr(1 / 3)}
    # The burst: each shard's bucket holds a third of it, and claims fall through the three.
    assert claims_until_refused(engine) == (30, 429)
    clock.advance(1.0)  # 600 a minute: 10 a second over the project (3.33 a shard, whole items)
    got, code = claims_until_refused(engine)
    assert 9 <= got <= 10 and code == 429


def test_the_claims_limit_holds_within_one_item_a_shard(admin, engine, layout, r):
    item_verbs.add(admin, P, URLS)
    project_verbs.set_settings(admin, P, {"claims_limit": "10", "reclaim_ttl_s": "0"})
    got, code = claims_until_refused(engine)
    # Each shard takes ceil(10 / 3) = 4: at most N - 1 over the project's limit (docs/sharding.md).
    assert 10 <= got <= 12 and code == 404
    assert sum(r.zcard(k.out) for k in layout.keys) == got


def test_the_per_downloader_cap_holds_within_one_item_a_shard(admin, engine, layout):
    item_verbs.add(admin, P, URLS)
    project_verbs.set_settings(admin, P, {"max_claims_per_downloader": "6"})
    got, code = claims_until_refused(engine)
    assert got == 6 and code == 404  # ceil(6 / 3) = 2 a shard: exact when N divides the cap
    assert claims_until_refused(engine, "bob")[0] == 6


def test_a_claim_that_falls_through_counts_one_request(admin, engine, layout):
    on_two = [u for u in URLS if layout.shard_of(u) == 2][:4]
    item_verbs.add(admin, P, on_two)
    for _ in range(4):
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    item_verbs.add(admin, P, URLS[:9])
    code, names = engine.claim(P, "alice", "10.0.0.1", 9)  # gathered from the three shards
    assert code == 200 and len(names) == 9 - len(set(URLS[:9]) & set(on_two))
    counters = census_verbs.status(admin, P)["counters"]
    assert counters["requests"] == 6
    assert (counters["requests_served"], counters["requests_empty"]) == (5, 1)
    assert counters["items_claimed"] == 4 + len(names)


def test_a_shard_out_of_reach_is_passed_over_and_never_turns_into_a_404(layout):
    # The router over a visit that plays the shards' answers: shard 1 unreachable (its primary
    # failing over, nothing sent), shard 2 with one item; the real failover is in
    # tests/e2e/test_sharded_cluster.py and `make chaos-cluster`.
    def visit_with(answers):
        def visit(keys, room, mode):
            answer = answers[layout.keys.index(keys)]
            if isinstance(answer, Exception):
                raise answer
            return answer

        return visit

    lost, unknown = ConnectionLost("shard 1 down"), OutcomeUnknown("answer lost")
    served = visit_with([(404, 1, []), lost, (200, 1, ["x"])])
    assert shard_router.claim(layout, 1, 1, served)[:2] == (200, ["x"])
    with pytest.raises(ConnectionLost):  # the shard out of reach may hold items: a 503
        shard_router.claim(layout, 0, 1, visit_with([(404, 1, []), lost, (404, 1, [])]))
    gathered = visit_with([(200, 1, ["a"]), unknown, (200, 1, ["b"])])
    assert shard_router.claim(layout, 0, 3, gathered)[:2] == (200, ["a"])
    with pytest.raises(OutcomeUnknown):
        shard_router.claim(layout, 1, 3, gathered)


def test_shards_that_just_answered_nothing_are_tried_last(admin, engine, layout, r, monkeypatch):
    # The end of a project: items on one shard of three. A claim that starts at an empty shard
    # costs a script call per empty shard; a process tries those last for a moment, so after the
    # first claims each costs one call (still no 404 while any shard has items).
    on_two = [u for u in (f"{url}&more={n}" for n in range(4) for url in URLS) if layout.shard_of(u) == 2]
    assert len(on_two) > 13
    item_verbs.add(admin, P, on_two)

    def script_calls() -> int:
        return r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)

    monkeypatch.setattr(shard_router, "EMPTY_MEMORY_S", 60.0)  # a loaded machine stays within it
    for _ in range(3):  # the first claims find the empty shards, wherever the rotation starts
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    before = script_calls()
    for _ in range(10):
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert script_calls() - before == 10
