"""Reclaims, the claims limit, dead items, limited sub-queues and the serve order (claim-21.lua),
against a real Redis with a controlled clock."""

import json

import pytest

from support.projects import new_project
from tracker_core.admin import census_verbs, dead_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.derived_counters import with_derived

P = "recl"
K = ProjectKeys(P)
A, B, C = ("alice", "10.0.0.1"), ("bob", "10.0.0.2"), ("carol", "10.0.0.3")


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


def add(ctx, names, queue="todo"):
    return item_verbs.add(ctx, P, names, queue=queue)


def claim(engine, who, n=1):
    return engine.claim(P, who[0], who[1], n)


def counter(r, field):
    """FIELD of the project's totals as the readers see them (derived_counters)."""
    return with_derived({f: int(v) for f, v in r.hgetall(K.stats).items()}, totals=True).get(field, 0)


def test_a_lost_claim_comes_back_after_6_hours_by_default(project, engine, clock, r, ctx):
    # A claim whose answer never reached the warrior is only found again by reclaiming.
    add(ctx, ["x"])
    assert claim(engine, A) == (200, ["x"])
    clock.advance(6 * 3600 - 1)
    assert claim(engine, B) == (404, [])
    clock.advance(1)
    assert claim(engine, B) == (200, ["x"])
    # A project without the field (reset with `reclaim_ttl_s=`) gets the default too.
    r.hdel(K.settings, "reclaim_ttl_s")
    clock.advance(2 * 6 * 3600)
    assert claim(engine, C) == (200, ["x"])


def test_reclaims_are_off_with_a_ttl_of_0(project, engine, clock, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "0"})
    add(ctx, ["x"])
    assert claim(engine, A) == (200, ["x"])
    clock.advance(10**6)
    assert claim(engine, B) == (404, [])


def test_reclaim_waits_ttl_times_claim_count(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "60"})
    add(ctx, ["x"])
    assert claim(engine, A) == (200, ["x"])
    clock.advance(59.9)
    assert claim(engine, B) == (404, [])
    clock.advance(0.2)  # older than 60 s x 1 claim
    assert claim(engine, B) == (200, ["x"])
    assert r.hget(K.claims, "x") == f"bob\t10.0.0.2\t2\t{int(clock.now * 1000)}"
    assert r.zscore(K.out, "x") == int(clock.now * 1000) + 2 * 60_000  # due after 60 s x 2 claims
    assert r.hget(K.downloader_claims, "bob") == "1" and r.hget(K.downloader_claims, "alice") is None
    clock.advance(119)  # second round: 60 s x 2 claims
    assert claim(engine, C) == (404, [])
    clock.advance(1.1)
    assert claim(engine, C) == (200, ["x"])
    assert r.hget(K.claims, "x") == f"carol\t10.0.0.3\t3\t{int(clock.now * 1000)}"
    # A reclaim changes only the claim count and the reclaim statistics.
    assert counter(r, "items_claimed") == 1 and counter(r, "reclaims_served") == 2
    assert counter(r, "items_reclaimed") == 1  # one item, reclaimed at least once
    assert r.zcard(K.out) == 1 and r.scard(K.todo) == 0


def test_done_or_released_claims_are_not_reclaimed(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "10"})
    add(ctx, ["a", "b"])
    status, items = claim(engine, A, 2)
    assert status == 200 and sorted(items) == ["a", "b"]
    engine.done(P, "alice", "1", ["a"], [], "id1")
    assert engine.release(P, "alice", ["b"]) == 1
    clock.advance(100)
    assert claim(engine, B) == (200, ["b"])  # from todo, as a fresh claim
    assert r.hget(K.claims, "b") == f"bob\t10.0.0.2\t1\t{int(clock.now * 1000)}"
    assert claim(engine, C) == (404, [])  # "a" is done: it left `out`, nothing of it is left
    assert r.zrange(K.out, 0, -1) == ["b"] and r.hkeys(K.claims) == ["b"]


def test_ordinary_reclaims_come_after_every_queue(project, engine, clock, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "10"})
    add(ctx, ["old"])
    assert claim(engine, A) == (200, ["old"])
    clock.advance(11)
    add(ctx, ["redo1"], "redo")
    add(ctx, ["new1"])
    assert claim(engine, B) == (200, ["new1"])
    assert claim(engine, B) == (200, ["redo1"])
    assert claim(engine, B) == (200, ["old"])


def test_claims_limit_serves_reclaims_first_then_404_without_change(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"claims_limit": "2", "reclaim_ttl_s": "30"})
    add(ctx, ["a", "b", "c", "d"])
    status, first = claim(engine, A, 5)
    assert status == 200 and len(first) == 2  # capped to the room left in `out`
    before = (r.zrange(K.out, 0, -1, withscores=True), r.hgetall(K.claims), r.smembers(K.todo))
    assert claim(engine, B) == (404, [])
    assert (r.zrange(K.out, 0, -1, withscores=True), r.hgetall(K.claims), r.smembers(K.todo)) == before
    assert counter(r, "requests_claims_limited") == 1
    clock.advance(31)
    status, again = claim(engine, B, 5)  # the limit is hit: only reclaims
    assert status == 200 and sorted(again) == sorted(first)
    assert r.scard(K.todo) == 2 and r.zcard(K.out) == 2


def test_items_reclaimed_too_often_go_dead_and_can_be_requeued(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "1", "max_reclaims": "2"})
    add(ctx, ["x"])
    assert claim(engine, A) == (200, ["x"])
    for n, who in ((1, B), (2, C)):
        clock.advance(n + 0.5)
        assert claim(engine, who) == (200, ["x"])
    clock.advance(3.5)
    assert claim(engine, A) == (404, [])  # the third reclaim would exceed the maximum
    assert r.zscore(K.out, "x") is None and r.hget(K.claims, "x") is None
    assert r.hget(K.downloader_claims, "carol") is None
    history = json.loads(r.hget(K.dead, "x"))
    assert history["claims"] == 3 and history["last_downloader"] == "carol"
    # Every round the item went through, oldest first, with who held it and when.
    assert [(h["downloader"], h["ip"]) for h in history["rounds"]] == [A, B, C]
    times = [h["claimed_ms"] for h in history["rounds"]]
    assert times == sorted(times) and len(set(times)) == 3
    assert not r.exists(K.reclaim_history)
    assert counter(r, "items_dead") == 1
    assert [d["item"] for d in dead_verbs.list_dead(ctx, P)["dead"]] == ["x"]
    assert dead_verbs.requeue(ctx, P, ["x", "nope"]) == {"requeued": 1}
    assert not r.exists(K.dead) and r.smembers(K.todo) == {"x"}
    assert claim(engine, A) == (200, ["x"])
    assert r.hget(K.claims, "x") == f"alice\t10.0.0.1\t1\t{int(clock.now * 1000)}"


def test_limited_items_wait_for_their_bucket_and_others_go_first(project, engine, clock, r, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/s")
    add(ctx, ["user:a", "user:b", "user:c", "page:1", "page:2"])
    assert r.zcard(K.limited) == 3 and r.scard(K.todo) == 2 and r.scard(K.limited_in) == 0
    got = [claim(engine, A) for _ in range(4)]
    # One token: one user item (held items that are due come first), then the free ones.
    assert got[0][1][0].startswith("user:")
    assert sorted(x[1][0] for x in got[1:3]) == ["page:1", "page:2"]
    assert got[3] == (404, [])
    clock.advance(1.0)
    status, items = claim(engine, A, 10)
    assert status == 200 and len(items) == 1 and items[0].startswith("user:")
    clock.advance(5)  # the bucket holds one second's worth
    status, items = claim(engine, A, 10)
    assert status == 200 and len(items) == 1
    assert r.zcard(K.limited) == 0 and r.zscore(K.limits_ready, "users") is None
    assert r.hget(K.limit_tat, "users") is not None  # the bucket survives an empty sub-queue
    add(ctx, ["user:d"])
    assert claim(engine, A) == (404, [])  # no token yet: it stays held
    clock.advance(1)
    assert claim(engine, A) == (200, ["user:d"])


def test_a_request_gets_free_items_however_much_is_held(project, engine, r, ctx):
    for i in range(50):
        limit_verbs.add(ctx, P, f"site{i}", f"domain:site{i}.org", "1/m")
    held = [f"http://site{i % 50}.org/{i}" for i in range(2000)]
    add(ctx, held + ["free1", "free2"])
    assert r.zcard(K.limited) == 2000
    status, items = claim(engine, A, 100)
    # 50 tokens, one per limit, then both free items: nothing depends on luck.
    assert status == 200 and len(items) == 52 and {"free1", "free2"} <= set(items)
    assert claim(engine, A, 100) == (404, [])


def test_removed_limit_releases_its_items_and_items_for_one_downloader_are_not_held(project, engine, r, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    add(ctx, ["user:a", "user:b"])
    add(ctx, ["user:own"], "downloader:alice")
    assert r.smembers(K.downloader_queue("alice")) == {"user:own"}
    assert claim(engine, A) == (200, ["user:a"])  # the one token, held items first
    assert claim(engine, A) == (200, ["user:own"])
    assert claim(engine, A) == (404, [])
    limit_verbs.remove(ctx, P, "users")
    assert claim(engine, A) == (200, ["user:b"])


def test_serve_order_across_every_source(project, engine, clock, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "5"})
    limit_verbs.add(ctx, P, "users", "type:user", "1/s")
    add(ctx, ["reclaimme"])
    assert claim(engine, B) == (200, ["reclaimme"])
    clock.advance(6)
    add(ctx, ["user:held"])
    add(ctx, ["own1"], "downloader:alice")
    add(ctx, ["main1"])
    add(ctx, ["bf1"], "backfeed")
    add(ctx, ["sec1"], "secondary")
    add(ctx, ["redo1"], "redo")
    got = [claim(engine, A)[1] for _ in range(8)]
    assert got == [["user:held"], ["own1"], ["main1"], ["bf1"], ["sec1"], ["redo1"], ["reclaimme"], []]


def test_cli_lists_and_requeues_dead_items(project, engine, clock, r, redis_url, ctx):
    from click.testing import CliRunner

    from tracker_api.cli import main

    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "1", "max_reclaims": "1"})
    add(ctx, ["x", "y"])
    claim(engine, A, 2)
    clock.advance(1.5)
    claim(engine, B, 2)
    clock.advance(2.5)
    assert claim(engine, C, 2) == (404, [])
    assert census_verbs.status(ctx, P)["dead"] == 2
    runner = CliRunner()
    res = runner.invoke(main, ["--redis-url", redis_url, "dead", "list", P, "--json"])
    assert res.exit_code == 0
    assert sorted(json.loads(line)["item"] for line in res.output.splitlines()) == ["x", "y"]
    res = runner.invoke(main, ["--redis-url", redis_url, "dead", "requeue", P])
    assert res.exit_code == 2 and "--all" in res.output
    res = runner.invoke(main, ["--redis-url", redis_url, "dead", "requeue", P, "x", "--queue", "redo"])
    assert res.exit_code == 0 and "requeued 1" in res.output
    assert r.smembers(K.redo) == {"x"}
    res = runner.invoke(main, ["--redis-url", redis_url, "dead", "requeue", P, "--all"])
    assert "requeued 1" in res.output and r.smembers(K.todo) == {"y"} and not r.exists(K.dead)
    status = census_verbs.status(ctx, P)
    assert status["dead"] == 0 and status["todo_total"] == 2


def test_status_counts_held_items(project, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/s")
    add(ctx, ["user:a", "user:b", "free"])
    status = census_verbs.status(ctx, P)
    assert status["queues"]["limited"] == 2 and status["todo_total"] == 3


def test_a_new_limit_holds_queued_and_released_items(project, engine, r, redis_url, ctx):
    from click.testing import CliRunner

    from tracker_api.cli import main

    add(ctx, ["user:a", "user:b", "page:1"])
    add(ctx, ["user:c"], "secondary")
    assert claim(engine, A)[0] == 200
    out_before = r.zrange(K.out, 0, -1)
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    held = {m.split("\0", 1)[1] for m in r.zrange(K.limited, 0, -1)}
    assert held == {"user:a", "user:b", "user:c"} - set(out_before)
    assert r.scard(K.todo) + r.scard(K.secondary) + r.zcard(K.limited) + r.zcard(K.out) == 4
    # A release holds a limited item at once (a free one goes back to todo), so reclassifying
    # finds nothing more to hold.
    released = out_before[0]
    engine.release(P, "alice", [released])
    assert r.zcard(K.limited) == 3 and r.scard(K.todo) == 1
    res = CliRunner().invoke(main, ["--redis-url", redis_url, "limit", "reclassify", P])
    assert res.exit_code == 0 and "held 0 queued items" in res.output
    assert r.zcard(K.limited) == 3 and r.scard(K.todo) == 1


def test_done_from_the_old_holder_after_a_reclaim_counts_once(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "10"})
    add(ctx, ["x"])
    claim(engine, A)
    clock.advance(11)
    assert claim(engine, B) == (200, ["x"])
    assert engine.done(P, "alice", "1", ["x"], [], "late").new == 1
    assert engine.done(P, "bob", "1", ["x"], [], "again").new == 0
    assert r.hgetall(K.downloader_claims) == {} and r.zcard(K.out) == 0
    clock.advance(100)
    assert claim(engine, C) == (404, [])  # nothing left to reclaim
    assert not r.exists(K.out) and not r.exists(K.claims)


def test_reclaim_history_is_kept_until_done_or_released(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "1"})
    add(ctx, ["x", "y", "z"])
    assert claim(engine, A, 3)[0] == 200
    clock.advance(1.5)
    assert sorted(claim(engine, B, 3)[1]) == ["x", "y", "z"]  # three reclaims
    rounds = json.loads(r.hget(K.reclaim_history, "x"))
    assert [(h["downloader"], h["ip"]) for h in rounds] == [A]
    assert engine.done(P, "bob", "1", ["x"], ["data", 1], "{}").new == 1
    assert engine.release(P, "bob", ["y"]) == 1
    assert r.hkeys(K.reclaim_history) == ["z"]  # only the one still out
    clock.advance(2.5)
    assert claim(engine, C, 2)[1].count("z") == 1  # z again: a second round
    assert len(json.loads(r.hget(K.reclaim_history, "z"))) == 2


def test_claims_limit_serves_the_queues_when_every_due_reclaim_goes_dead(project, engine, clock, r, ctx):
    # The limit is reached and both due reclaims exceed max_reclaims: they go to `dead`, which
    # frees their room in `out`, so the same request is served from todo instead of a 404 that
    # would idle the warrior while items wait.
    urls = [f"https://example.com/p/{n}?q=a b&r=%2F#frag/" + "x" * 3000 for n in range(5)]
    project_verbs.set_settings(ctx, P, {"claims_limit": "2", "reclaim_ttl_s": "10", "max_reclaims": "1"})
    add(ctx, urls)
    status, first = claim(engine, A, 5)
    assert status == 200 and len(first) == 2
    clock.advance(11)
    status, again = claim(engine, B, 5)  # reclaimed once (the maximum)
    assert status == 200 and sorted(again) == sorted(first)
    clock.advance(21)  # due again: 10 s x 2 claims
    status, items = claim(engine, C, 5)
    assert status == 200 and len(items) == 2 and not set(items) & set(first)
    assert set(r.hkeys(K.dead)) == set(first)
    assert sorted(r.zrange(K.out, 0, -1)) == sorted(items)
    assert {r.hget(K.claims, i) for i in items} == {f"carol\t10.0.0.3\t1\t{int(clock.now * 1000)}"}
    assert r.scard(K.todo) == 1 and r.hget(K.downloader_claims, "bob") is None
    assert counter(r, "items_dead") == 2 and counter(r, "items_claimed") == 4
    assert counter(r, "requests_claims_limited") == 0
    # Never past the limit: the room is what the dead made, whatever was asked.
    assert claim(engine, A, 5) == (404, [])
    assert counter(r, "requests_claims_limited") == 1 and r.zcard(K.out) == 2


def test_claims_limit_serves_only_the_room_the_dead_made(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"claims_limit": "2", "reclaim_ttl_s": "10", "max_reclaims": "1"})
    add(ctx, ["a", "b"])
    assert claim(engine, A, 2)[0] == 200
    clock.advance(11)
    assert claim(engine, B, 2)[0] == 200  # a and b reclaimed once: due at 31 s
    project_verbs.set_settings(ctx, P, {"claims_limit": "3"})
    add(ctx, ["c"])
    clock.advance(14)
    assert claim(engine, C, 1) == (200, ["c"])  # due at 35 s; out holds 3: the limit
    add(ctx, ["d", "e"])
    clock.advance(7)
    # a and b go dead (2 of room), c is not due: two fresh items, and the third wanted is not
    # served past the limit.
    status, items = claim(engine, A, 5)
    assert status == 200 and sorted(items) == ["d", "e"]
    assert r.zcard(K.out) == 3 and sorted(r.hkeys(K.dead)) == ["a", "b"]
    assert r.scard(K.todo) == 0


def test_claims_limit_with_every_reclaim_dead_and_nothing_queued_is_an_empty_404(
    project, engine, clock, r, ctx
):
    project_verbs.set_settings(ctx, P, {"claims_limit": "1", "reclaim_ttl_s": "10", "max_reclaims": "1"})
    add(ctx, ["only"])
    assert claim(engine, A) == (200, ["only"])
    clock.advance(11)
    assert claim(engine, B) == (200, ["only"])
    clock.advance(21)
    assert claim(engine, C) == (404, [])
    assert r.hkeys(K.dead) == ["only"] and r.zcard(K.out) == 0
    assert counter(r, "requests_empty") == 1 and counter(r, "requests_claims_limited") == 0


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
