"""Every way in and every admin verb at its documented maximum and just past it.

Each test checks the invariant afterwards: every item in exactly one place (a queue, held by a
limit, out, done or dead) and the counters equal to what moved. The scripts behind these verbs
once popped thousands of entries and then failed on `unpack` (Lua stops near 8,000 values), and
Redis keeps a failed script's earlier writes: the popped items were in no place at all.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from falcon import testing

from support import census
from support.projects import new_project
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_core import keyspace, scripts
from tracker_core.access import backfeed_secrets
from tracker_core.admin import (
    census_verbs,
    checks,
    claim_verbs,
    dead_verbs,
    item_verbs,
    limit_verbs,
    project_verbs,
)
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError
from tracker_core.items import backfeed, intake
from tracker_core.items.intake import ADD_BATCH
from tracker_core.project import pattern_limits

P = "max"
K = keyspace.ProjectKeys(P)
PER_POST = backfeed.MAX_ITEMS_PER_POST  # 10,000: the backfeed's documented maximum
LIMIT = ("site", "domain:example.com", "5/s")


def url(i: int, tag: str = "u") -> str:
    """An item name as the biggest projects have them: a URL with ?, %, # and a space."""
    return f"https://www.example.com/{tag}/{i}/page?q=a%20b&n={i}#frag {i}"


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


def assert_each_once(r, names) -> None:
    census.assert_each_once(r, K, names)


def fill(r, key: str, names: list[str]) -> None:
    pipe = r.pipeline(transaction=False)
    for start in range(0, len(names), 10_000):
        pipe.sadd(key, *names[start : start + 10_000])
    pipe.execute()


# -- backfeed: 10,000 items per post, all matching a limit --------------------------------------


@pytest.fixture
def secret(project, r):
    return backfeed_secrets.create(r, K)[1]


def post(engine, secret, names):
    client = testing.TestClient(create_app(engine))
    return client.simulate_post(
        f"/backfeed/legacy/{P}-{secret}", body=b"\0".join(n.encode() for n in names) + b"\0"
    )


def test_a_backfeed_post_at_the_maximum_all_limited_holds_every_item(project, engine, r, secret, ctx):
    limit_verbs.add(ctx, P, *LIMIT)
    names = [url(i) for i in range(PER_POST)]
    res = post(engine, secret, names)
    assert res.status_code == 200, res.text
    assert res.json == {"status_code": 200, "data": f"{PER_POST} items queued for deduplication"}
    assert r.zcard(K.limited) == PER_POST and r.scard(K.limited_in) == 0
    assert r.hget(K.stats, "backfeed_new") == str(PER_POST)
    assert_each_once(r, names)


def test_a_backfeed_post_just_past_the_maximum_is_refused_and_changes_nothing(
    project, engine, r, secret, ctx
):
    limit_verbs.add(ctx, P, *LIMIT)
    res = post(engine, secret, [url(i) for i in range(PER_POST + 1)])
    assert res.status_code == 400
    assert res.json["reason"] == f"too many items: at most {PER_POST} per post"
    assert r.zcard(K.limited) == 0 and r.scard(K.backfeed) == 0
    assert r.hget(K.stats, "backfeed_bad_body") == "1"
    assert r.hget(K.bloom, "items") in (None, "0")


# -- limit add and reclassify over 100k queued items ---------------------------------------------

N_QUEUED = 100_000


def test_limit_add_over_100k_queued_items_holds_them_all(project, r, ctx):
    names = [url(i) for i in range(N_QUEUED)]
    fill(r, K.todo, names)
    limit_verbs.add(ctx, P, *LIMIT)
    assert r.zcard(K.limited) == N_QUEUED and r.scard(K.todo) == 0
    assert r.scard(K.limited_in) == 0
    assert_each_once(r, names)
    # Adding a second limit rescans the queues; the 100k held items stay where they are.
    limit_verbs.add(ctx, P, "other", "prefix:ftp://", "1/s")
    assert r.zcard(K.limited) == N_QUEUED
    assert census_verbs.status(ctx, P)["todo_total"] == N_QUEUED


def test_reclassify_over_100k_queued_then_100k_held_items(project, r, ctx):
    free = [f"https://free.example.org/{i}" for i in range(1000)]
    names = [url(i) for i in range(N_QUEUED)]
    fill(r, K.backfeed, names + free)
    limit_verbs.add(ctx, P, *LIMIT, reclassify=False)
    assert limit_verbs.reclassify(ctx, P) == {"held": N_QUEUED}
    assert r.zcard(K.limited) == N_QUEUED and r.smembers(K.backfeed) == set(free)
    assert limit_verbs.reclassify(ctx, P) == {"held": 0}  # a second pass over 100k held items
    assert r.zcard(K.limited) == N_QUEUED
    assert_each_once(r, names + free)


def test_held_items_left_in_the_way_in_set_are_filed_by_reclassify(project, admin, r, ctx):
    # What a crash between a script and hold_new leaves: 100k entries in the way-in set.
    limit_verbs.add(ctx, P, *LIMIT)
    names = [url(i) for i in range(N_QUEUED)]
    fill(r, K.limited_in, [pattern_limits.held_entry("site", n) for n in names])
    limit_verbs.reclassify(ctx, P)
    assert r.scard(K.limited_in) == 0 and r.zcard(K.limited) == N_QUEUED
    assert_each_once(r, names)


# -- admin release of 10,000 claims, requeue of 10,000 dead items --------------------------------


def claim_all(engine, n: int) -> list[str]:
    got = []
    while len(got) < n:
        status, items = engine.claim(P, "alice", "10.0.0.1", 1000)
        assert status == 200
        got += items
    return got


def test_admin_release_of_a_full_page_of_claims_that_a_limit_matches(project, engine, r, ctx):
    names = [url(i) for i in range(checks.MAX_PAGE + 1)]
    fill(r, K.todo, names)
    claim_all(engine, len(names))
    limit_verbs.add(ctx, P, *LIMIT)
    page = claim_verbs.release(ctx, P, older_than_s=0, limit=checks.MAX_PAGE)
    assert page == {"released": checks.MAX_PAGE, "cursor": 1}
    assert r.zcard(K.limited) == checks.MAX_PAGE and r.zcard(K.out) == 1
    assert r.hget(K.stats, "items_released") == str(checks.MAX_PAGE)
    assert r.hlen(K.downloader_claims) == 1 and r.hget(K.downloader_claims, "alice") == "1"
    assert_each_once(r, names)
    # Just past the maximum: a page is capped at MAX_PAGE, the rest comes with the next call.
    assert claim_verbs.release(ctx, P, older_than_s=0, limit=checks.MAX_PAGE + 1) == {
        "released": 1,
        "cursor": 0,
    }
    assert r.zcard(K.out) == 0 and r.hlen(K.claims) == 0
    assert_each_once(r, names)


def test_requeue_of_the_most_dead_items_at_once_holds_the_limited(project, r, ctx):
    names = [url(i) for i in range(checks.MAX_PAGE)]
    record = json.dumps({"claims": 3, "last_downloader": "alice"})
    pipe = r.pipeline(transaction=False)
    for start in range(0, len(names), 5000):
        pipe.hset(K.dead, mapping=dict.fromkeys(names[start : start + 5000], record))
    pipe.execute()
    limit_verbs.add(ctx, P, *LIMIT)
    with pytest.raises(AdminError, match="give 1 to 10000 item names"):
        dead_verbs.requeue(ctx, P, names + ["one more"])
    assert r.hlen(K.dead) == checks.MAX_PAGE and r.zcard(K.limited) == 0
    assert dead_verbs.requeue(ctx, P, names) == {"requeued": checks.MAX_PAGE}
    assert r.hlen(K.dead) == 0 and r.zcard(K.limited) == checks.MAX_PAGE
    assert r.hget(K.stats, "items_requeued_dead") == str(checks.MAX_PAGE)
    assert_each_once(r, names)


def test_requeue_of_a_full_page_of_dead_items_by_cursor(project, r, ctx):
    names = [url(i) for i in range(checks.MAX_PAGE)]
    r.hset(K.dead, mapping=dict.fromkeys(names, "{}"))
    limit_verbs.add(ctx, P, *LIMIT)
    cursor, moved = 0, 0
    while True:
        page = dead_verbs.requeue_page(ctx, P, cursor, limit=checks.MAX_PAGE)
        moved += page["requeued"]
        cursor = page["cursor"]
        if cursor == 0:
            break
    assert moved == checks.MAX_PAGE and r.zcard(K.limited) == checks.MAX_PAGE
    assert_each_once(r, names)


# -- items add at its batch maximum --------------------------------------------------------------


def test_items_add_at_its_batch_maximum_all_limited(project, r, ctx):
    limit_verbs.add(ctx, P, *LIMIT)
    names = [url(i) for i in range(ADD_BATCH + 1)]
    batches = list(intake.add(r, K, names))
    assert batches == [(ADD_BATCH, 0), (1, 0)]
    assert r.zcard(K.limited) == ADD_BATCH + 1
    assert_each_once(r, names)


def test_cli_items_add_at_its_largest_batch_and_just_past_it(project, r, redis_url, tmp_path, ctx):
    limit_verbs.add(ctx, P, *LIMIT)
    names = [url(i) for i in range(12_000)] + [f"plain-{i}" for i in range(100)]
    source = tmp_path / "items.txt"
    source.write_text("\n".join(names) + "\n")
    runner = CliRunner()
    res = runner.invoke(
        main, ["--redis-url", redis_url, "items", "add", P, str(source), "--batch", "100000", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[-1])["added"] == len(names)
    assert r.zcard(K.limited) == 12_000 and r.scard(K.todo) == 100
    assert_each_once(r, names)
    res = runner.invoke(main, ["--redis-url", redis_url, "items", "add", P, str(source), "--batch", "100001"])
    assert res.exit_code == 2
    assert_each_once(r, names)


# -- multi=1000 over held items ------------------------------------------------------------------


def test_a_claim_of_1000_held_items_at_once(project, engine, r, ctx):
    limit_verbs.add(ctx, P, "fast", "domain:example.com", "1000000/s")
    names = [url(i) for i in range(2500)]
    item_verbs.add(ctx, P, names)
    assert r.zcard(K.limited) == 2500
    status, got = engine.claim(P, "alice", "10.0.0.1", 1000)
    assert status == 200 and len(got) == 1000 and len(set(got)) == 1000
    assert r.zcard(K.out) == 1000 and r.zcard(K.limited) == 1500
    assert_each_once(r, names)


def test_hold_limited_that_fails_changes_nothing(project, r):
    # A failure must come before the first write: with the held zset of the wrong type the
    # script once popped the way-in set and then failed on ZADD, and the popped items were gone.
    entries = {pattern_limits.held_entry("site", url(i)) for i in range(3)}
    r.sadd(K.limited_in, *entries)
    r.set(K.limited, "not a zset")
    with pytest.raises(Exception, match="WRONGTYPE"):
        pattern_limits.hold_new(r, K)
    assert r.smembers(K.limited_in) == entries


# -- a script that fails changes nothing ----------------------------------------------------------
# Each case once wrote first (an item left its place, a counter moved) and failed after.


def run(r, name, keys, args):
    """Script NAME with KEYS and ARGV as given: what no binding would send."""
    return scripts.BINDINGS[name].send(r, keys, args)


def test_hold_queued_with_a_broken_way_in_set_leaves_the_item_queued(project, r):
    r.sadd(K.todo, url(1))
    r.set(K.limited_in, "broken")
    with pytest.raises(Exception, match="WRONGTYPE"):
        scripts.hold_queued(
            r, K, queue=K.todo, items=[url(1)], held=[pattern_limits.held_entry("site", url(1))]
        )
    assert r.smembers(K.todo) == {url(1)}


def test_move_and_requeue_with_a_broken_way_in_set_change_nothing(project, r):
    r.sadd(K.todo, url(1), url(2))
    r.hset(K.dead, url(3), "{}")
    r.set(K.limited_in, "broken")
    pairs = (url(2), "", url(1), pattern_limits.held_entry("site", url(1)))
    with pytest.raises(Exception, match="WRONGTYPE"):
        run(
            r,
            "move_items",
            (K.settings, K.todo, K.secondary, K.downloader_queues, K.limited_in),
            ("", *pairs),
        )
    assert r.smembers(K.todo) == {url(1), url(2)} and r.scard(K.secondary) == 0
    with pytest.raises(Exception, match="WRONGTYPE"):
        run(
            r,
            "requeue_dead",
            (K.dead, K.todo, K.stats, K.limited_in, K.downloader_queues),
            ("", url(3), pattern_limits.held_entry("site", url(3))),
        )
    assert r.hkeys(K.dead) == [url(3)]


def test_set_limit_with_a_record_that_is_not_json_moves_no_counter(project, r):
    with pytest.raises(Exception, match="Expected object key string"):  # cjson decoding
        run(
            r,
            "set_limit",
            (K.settings, K.limits, K.limits_ready, K.limit_tat),
            (P, keyspace.SETTINGS_CHANNEL, "set", "site", "{not json", 10),
        )
    assert r.hget(K.settings, "limits_seq") is None and r.hlen(K.limits) == 0


def test_set_settings_with_a_half_pair_changes_nothing(project, r):
    age = r.hget(K.settings, "settings_age")
    assert run(r, "set_settings", (K.settings,), (P, keyspace.SETTINGS_CHANNEL, "title", "x", "paused")) == -2
    assert r.hget(K.settings, "title") == "" and r.hget(K.settings, "settings_age") == age


def test_refill_into_a_broken_queue_keeps_the_segment_registered(project, r):
    r.set(K.maintain_lease, "me")
    r.hset(K.segments, "1", 2)
    r.hset(K.segment_queues, "1", "todo")
    r.set(K.todo, "broken")
    with pytest.raises(Exception, match="WRONGTYPE"):
        run(
            r,
            "refill",
            (K.maintain_lease, K.segments, K.segment_queues, K.todo, K.stats),
            ("me", 1, "todo", "", url(1), url(2)),
        )
    assert r.hget(K.segments, "1") == "2" and r.hget(K.segment_queues, "1") == "todo"


def test_offload_stage_with_a_damaged_counter_takes_nothing(project, r):
    r.set(K.maintain_lease, "me")
    r.sadd(K.todo, url(1), url(2))
    r.hset(K.segments, "#next", "x")
    reply = run(
        r,
        "offload_stage",
        (K.maintain_lease, K.todo, K.offloading, K.segments, K.segment_queues),
        ("me", 10, "todo"),
    )
    assert reply == [-3]
    assert r.scard(K.todo) == 2 and r.scard(K.offloading) == 0


def test_rollup_of_an_hour_with_thousands_of_fields(project, r):
    minute = K.minute(60)
    r.hset(minute, mapping={f"f{i}": 1 for i in range(5000)})
    assert run(r, "rollup_hour", (K.hour(1), minute, *[K.minute(61 + i) for i in range(59)]), (3600,)) == 1
    assert r.hlen(K.hour(1)) == 5001


# -- backfeed's bound on the items it may queue (backfeed_max_items) ------------------------------


def test_backfeed_at_its_bound_and_just_past_it(project, engine, r, secret, ctx):
    project_verbs.set_settings(ctx, P, {"backfeed_max_items": str(PER_POST)})
    names = [url(i) for i in range(PER_POST)]
    res = post(engine, secret, names)
    assert res.status_code == 200 and res.json["status_code"] == 200
    assert r.scard(K.backfeed) == PER_POST
    # One more new item: refused as a whole batch, nothing set in the filter, counted; a JSON
    # 503 that grab scripts decode and retry with back-off.
    res = post(engine, secret, names[:5] + [url(PER_POST)])
    assert res.status_code == 503
    assert res.json == {"status_code": 503, "reason": f"backfeed queue full ({PER_POST} items), retry later"}
    assert res.headers["Retry-After"] == "60"
    assert r.scard(K.backfeed) == PER_POST and r.hget(K.bloom, "items") == str(PER_POST)
    assert r.hget(K.stats, "backfeed_refused_full") == "1"
    # Items already seen add nothing, so they pass at the bound.
    assert post(engine, secret, names[:5]).status_code == 200
    # Once the queue drained a little, the retried post goes in.
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    res = post(engine, secret, names[:5] + [url(PER_POST)])
    assert res.status_code == 200
    assert r.scard(K.backfeed) == PER_POST and r.zcard(K.out) == 1
    assert_each_once(r, names + [url(PER_POST)])


def test_backfeed_bound_counts_held_items_and_is_off_while_offloading(project, engine, r, secret, ctx):
    project_verbs.set_settings(ctx, P, {"backfeed_max_items": "5"})
    limit_verbs.add(ctx, P, *LIMIT)
    first = [url(1), url(2), url(3), "https://free.example.org/1", "https://free.example.org/2"]
    assert post(engine, secret, first).status_code == 200
    assert r.zcard(K.limited) == 3 and r.scard(K.backfeed) == 2
    assert post(engine, secret, [url(4)]).status_code == 503
    assert post(engine, secret, ["https://free.example.org/3"]).status_code == 503
    # With offloading on, `tracker maintain` bounds the queue instead.
    project_verbs.set_settings(
        ctx, P, {"offload_high": "1000", "offload_low": "500", "offload_segment_items": "500"}
    )
    engine._settings.clear()
    assert post(engine, secret, [url(4), "https://free.example.org/3"]).status_code == 200
    assert_each_once(r, first + [url(4), "https://free.example.org/3"])


def test_a_backfeed_post_redis_refuses_gets_a_json_503(project, engine, r, secret):
    r.set(K.backfeed, "not a set")  # the script fails before it sets any bit
    res = post(engine, secret, ["https://example.org/x"])
    assert res.status_code == 503
    assert res.json["status_code"] == 503 and "retry later" in res.json["reason"]
    assert r.hget(K.bloom, "items") in (None, "0")


def test_release_with_a_broken_way_in_set_leaves_the_claim_out(project, engine, r):
    # The limited item would go to the way-in set after it left `out`: the type check comes first.
    r.sadd(K.todo, url(1))
    status, names = engine.claim(P, "alice", "10.0.0.1", 1)
    assert names == [url(1)]
    r.set(K.limited_in, "broken")
    with pytest.raises(Exception, match="WRONGTYPE"):
        run(
            r,
            "release",
            (
                K.settings,
                K.out,
                K.claims,
                K.todo,
                K.downloader_claims,
                K.stats,
                K.limited_in,
                K.reclaim_history,
            ),
            (1, "", "", url(1), pattern_limits.held_entry("site", url(1))),
        )
    assert r.zrange(K.out, 0, -1) == [url(1)] and r.hexists(K.claims, url(1))


def test_backfeed_is_refused_before_redis_is_full(project, engine, r, secret):
    # Under noeviction a full Redis refuses every project's claims and dones: what anonymous
    # clients add (backfeed secrets ship in public grab scripts) stops at 90% of maxmemory.
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory", str(int(used / 0.6)))  # used is about 60%: below the guard
    try:
        engine._memory_checked_at = float("-inf")
        assert post(engine, secret, [url(1)]).status_code == 200
        r.config_set("maxmemory", str(int(int(r.info("memory")["used_memory"]) / 0.95)))  # ~95%
        engine._memory_checked_at = float("-inf")
        res = post(engine, secret, [url(2), url(3)])
        assert res.status_code == 503 and res.json["status_code"] == 503
        assert res.json["reason"] == "tracker memory nearly full, retry later"
        assert r.smembers(K.backfeed) == {url(1)}
        assert r.hget(K.stats, "backfeed_refused_memory") == "1"
    finally:
        r.config_set("maxmemory", "0")


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
