"""Pattern limits: stored in Redis, listed, replaced, removed; each change reaches every node;
every way an item enters a shared queue holds the items a limit matches."""

import json
from collections import Counter

import pytest
import redis
from click.testing import CliRunner
from falcon import testing

from support.counters import totals
from support.projects import new_project
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_core import keyspace
from tracker_core.access import backfeed_secrets
from tracker_core.admin import census_verbs, claim_verbs, dead_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError
from tracker_core.items import bloom
from tracker_core.items.backfeed import Backfeed, split_body
from tracker_core.items.engine import Engine
from tracker_core.project import pattern_limits

P = "lim"


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


@pytest.fixture
def cli(redis_url):
    runner = CliRunner()
    return lambda *args: runner.invoke(main, ["--redis-url", redis_url, *args])


def _age(r):
    return int(r.hget(keyspace.ProjectKeys(P).settings, "settings_age"))


def test_add_list_replace_remove(project, r, ctx):
    start = _age(r)
    assert limit_verbs.add(ctx, P, "users", "type:user", "10/s")["settings_age"] == start + 1
    assert limit_verbs.add(ctx, P, "cdn", "domain:*.Example.COM", "30/m")["settings_age"] == start + 2
    assert limit_verbs.list_limits(ctx, P) == [
        {"name": "users", "pattern": "type:user", "rate": "10/s", "rate_per_s": 10.0, "seq": 1},
        {"name": "cdn", "pattern": "domain:example.com", "rate": "30/m", "rate_per_s": 0.5, "seq": 2},
    ]
    # Replacing keeps the limit's place in the classification order.
    limit_verbs.add(ctx, P, "users", "prefix:user:", "2.5")
    assert [(x["name"], x["pattern"], x["rate_per_s"]) for x in limit_verbs.list_limits(ctx, P)] == [
        ("users", "prefix:user:", 2.5),
        ("cdn", "domain:example.com", 0.5),
    ]
    assert limit_verbs.remove(ctx, P, "users")["settings_age"] == start + 4
    assert [x["name"] for x in limit_verbs.list_limits(ctx, P)] == ["cdn"]
    assert r.hkeys(keyspace.ProjectKeys(P).limits) == ["cdn"]


@pytest.mark.parametrize(
    "name,pattern,rate,reason",
    [
        ("Bad Name", "type:user", "1/s", "bad limit name"),
        ("ok", "user", "1/s", "pattern must start with"),
        ("ok", "regex:(", "1/s", "bad regular expression"),
        ("ok", "domain:a.com/x", "1/s", "domain is a host name"),
        ("ok", "type:user", "0/s", "bad rate"),
        ("ok", "type:user", "5/h", "bad rate"),
        ("ok", "type:user", "-1", "bad rate"),
        ("ok", "type:user", "2000000/s", "bad rate"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(project, r, name, pattern, rate, reason, ctx):
    before = _age(r)
    with pytest.raises(AdminError, match=reason):
        limit_verbs.add(ctx, P, name, pattern, rate)
    assert _age(r) == before
    assert limit_verbs.list_limits(ctx, P) == []


def test_unknown_project_and_unknown_limit(project, r, ctx):
    with pytest.raises(AdminError, match="unknown project"):
        limit_verbs.add(ctx, "nope", "x", "type:user", "1/s")
    before = _age(r)
    with pytest.raises(AdminError, match="unknown limit"):
        limit_verbs.remove(ctx, P, "ghost")
    assert _age(r) == before
    assert not r.exists("{nope}:limits")


def test_limit_count_is_capped(project, r, monkeypatch, ctx):
    monkeypatch.setattr(pattern_limits, "MAX_LIMITS", 2)
    limit_verbs.add(ctx, P, "a", "type:a", "1/s")
    limit_verbs.add(ctx, P, "b", "type:b", "1/s")
    limit_verbs.add(ctx, P, "a", "type:aa", "1/s")  # a replacement is not a new limit
    with pytest.raises(AdminError, match="too many limits"):
        limit_verbs.add(ctx, P, "c", "type:c", "1/s")
    assert [x["name"] for x in limit_verbs.list_limits(ctx, P)] == ["a", "b"]


def test_a_change_is_published_and_every_node_reloads(project, redis_url, r, ctx):
    node1, node2 = Engine(redis_url), Engine(redis_url)
    item_verbs.add(ctx, P, ["user:alice", "page:1"])
    assert node1.limits(P).name_of("user:alice") is None
    assert node2.limits(P).name_of("user:alice") is None
    pubsub = redis.Redis.from_url(redis_url, decode_responses=True).pubsub()
    pubsub.subscribe(keyspace.SETTINGS_CHANNEL)
    pubsub.get_message(timeout=1)
    age = limit_verbs.add(ctx, P, "users", "type:user", "1/s")["settings_age"]
    message = pubsub.get_message(timeout=2)
    assert message and message["data"] == f"{P} {age}"
    pubsub.close()
    # Each node learns the new age from its next claim's reply, then reloads the pattern set.
    for node in (node1, node2):
        node.claim(P, "someone", "127.0.0.1", 1)
        assert node.limits(P).name_of("user:alice") == "users"
        assert node.limits(P).name_of("page:1") is None


def test_cli_limit_commands(project, cli, ctx):
    res = cli("limit", "add", P, "users", "type:user", "10/m")
    assert res.exit_code == 0, res.output
    assert "limit users of lim set" in res.output
    res = cli("limit", "list", P, "--json")
    assert res.exit_code == 0
    assert [(x["name"], x["rate"]) for x in json.loads(res.output)] == [("users", "10/m")]
    bad = cli("limit", "add", P, "x", "nokind", "1/s")
    assert bad.exit_code == 1 and "pattern must start with" in bad.output
    bad = cli("limit", "remove", P, "ghost")
    assert bad.exit_code == 1 and "unknown limit" in bad.output
    assert cli("limit", "remove", P, "users").exit_code == 0
    assert limit_verbs.list_limits(ctx, P) == []
    assert cli("limit", "list", "nope").exit_code == 1


# -- every way in holds limited items ---------------------------------------------------------
# Items that a limit matches wait in its sub-queue (todo:limited) whichever way they enter a
# shared queue: add, backfeed, release, requeue of dead items, queue moves. Each test drains
# what it queued and checks that every item was in exactly one place all along.

K = keyspace.ProjectKeys(P)
ALICE = ("alice", "10.0.0.1")


def add(ctx, names, queue="todo"):
    return item_verbs.add(ctx, P, names, queue=queue)


def claim(engine, n=100, who=ALICE):
    status, items = engine.claim(P, who[0], who[1], n)
    return items if status == 200 else []


def held_names(r):
    return sorted(m.split("\0", 1)[1] for m in r.zrange(K.limited, 0, -1))


def places(r) -> Counter:
    """How many places hold each item: queues, held (both sets), out, done and dead."""
    found = Counter()
    for queue in K.shared_queues():
        found.update(r.smembers(queue))
    for owner in r.smembers(K.downloader_queues):
        found.update(r.smembers(K.downloader_queue(owner)))
    found.update(m.split("\0", 1)[1] for m in r.zrange(K.limited, 0, -1))
    found.update(m.split("\0", 1)[1] for m in r.smembers(K.limited_in))
    found.update(r.zrange(K.out, 0, -1))
    found.update(r.smembers(K.done))
    found.update(r.hkeys(K.dead))
    return found


def assert_each_once(r, names):
    found = places(r)
    assert {n: found[n] for n in names} == {n: 1 for n in names}
    assert set(found) == set(names)


def drain_held(engine, clock, limit_items: int, every_s: float) -> list:
    """Claim one limit's items as its bucket allows: exactly one per EVERY_S seconds."""
    served = []
    for _ in range(limit_items):
        clock.advance(every_s)
        got = claim(engine)
        assert len(got) == 1, got
        assert claim(engine) == []  # nothing more before the next token
        served += got
    return served


@pytest.fixture
def secret(project, r):
    return backfeed_secrets.create(r, K)[1]


def test_backfeed_holds_limited_items_and_serves_them_at_the_rate(project, engine, clock, r, secret, ctx):
    # The auditor's case: 50 user: items backfed into a project limited to 1/m.
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    client = testing.TestClient(create_app(engine))
    body = b"\0".join([f"user:u{i}".encode() for i in range(50)] + [b"page:1", b"page:2"])
    res = client.simulate_post(f"/backfeed/legacy/{P}-{secret}", body=body)
    assert res.status_code == 200, res.text
    assert r.zcard(K.limited) == 50 and r.scard(K.limited_in) == 0
    assert r.smembers(K.backfeed) == {"page:1", "page:2"}
    assert r.zscore(K.limits_ready, "users") is not None
    # A repeat is deduplicated like any backfeed, held or not.
    res = client.simulate_post(f"/backfeed/legacy/{P}-{secret}", body=b"user:u1\0page:1\0user:new")
    assert res.status_code == 200
    stats = r.hgetall(K.stats)
    assert (stats["backfeed_new"], stats["backfeed_seen"]) == ("53", "2")
    users = [f"user:u{i}" for i in range(50)] + ["user:new"]
    assert_each_once(r, users + ["page:1", "page:2"])
    first = claim(engine)
    assert sorted(first) == sorted(first[:1] + ["page:1", "page:2"]) and first[0].startswith("user:")
    assert claim(engine) == []  # one token a minute, not 51 items at once
    served = first[:1] + drain_held(engine, clock, 50, 60)
    assert sorted(served) == sorted(users)
    assert r.zcard(K.limited) == 0 and r.zcard(K.out) == 53
    assert_each_once(r, users + ["page:1", "page:2"])


def test_backfeed_classifies_the_dedup_key_and_keeps_the_whole_entry(project, engine, clock, r, secret, ctx):
    limit_verbs.add(ctx, P, "users", r"regex:^user:[a-z]+$", "1/m")  # matches the key, not the entry
    feed = Backfeed(engine)
    entries, keys = split_body(b"user:bob\x1fdata1\0user:bob\x1fdata2\0page:1\x1fx", b"\0", b"\x1f")
    outcome = feed.submit(P, secret, entries, keys)
    assert (outcome.status, outcome.new, outcome.seen) == (bloom.OK, 2, 1)
    assert r.zrange(K.limited, 0, -1) == ["users\0user:bob\x1fdata1"]
    assert r.smembers(K.backfeed) == {"page:1\x1fx"}
    outcome = feed.submit(P, secret, *split_body(b"user:bob\x1fdata3", b"\0", b"\x1f"))
    assert (outcome.new, outcome.seen) == (0, 1)
    assert sorted(claim(engine)) == ["page:1\x1fx", "user:bob\x1fdata1"]


def test_backfeed_shards_mapped_to_a_downloader_are_not_held_shared_ones_are(project, engine, r, secret, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    r.hset(K.backfeed_shard_map, "mine", "downloader:alice")
    r.hset(K.backfeed_shard_map, "sec", "secondary")
    feed = Backfeed(engine)
    assert feed.submit(P, secret, [b"user:a", b"user:b"], [b"user:a", b"user:b"], "mine").new == 2
    assert r.smembers(K.downloader_queue("alice")) == {"user:a", "user:b"}
    assert feed.submit(P, secret, [b"user:c", b"x"], [b"user:c", b"x"], "sec").new == 2
    assert held_names(r) == ["user:c"] and r.smembers(K.secondary) == {"x"}
    assert r.hgetall(K.backfeed_shards) == {"mine": "2", "sec": "2"}
    assert_each_once(r, ["user:a", "user:b", "user:c", "x"])


def test_backfeed_sees_a_new_limit_within_a_second(project, engine, r, secret, monkeypatch, ctx):
    # The engine's settings cache expires (1 s) and its limits reload on a new settings age.
    monkeypatch.setattr("tracker_core.items.engine._SETTINGS_CACHE_S", 0.0)  # as if a second passed each time
    feed = Backfeed(engine)
    assert feed.submit(P, secret, [b"user:a"], [b"user:a"]).new == 1  # caches the settings
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    assert feed.submit(P, secret, [b"user:b"], [b"user:b"]).new == 1
    assert held_names(r) == ["user:a", "user:b"]  # user:a by add_limit's reclassify


def test_release_holds_limited_items(project, engine, clock, r, redis_url, ctx):
    add(ctx, ["user:a", "user:b", "page:1"])
    got = claim(engine)
    assert sorted(got) == ["page:1", "user:a", "user:b"]
    # Another node whose cached limits predate the limit: the script sees the settings age
    # moved and the node classifies again, so the release cannot slip past the limit.
    node = Engine(redis_url, clock=clock)
    assert node.limits(P).limits == []
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    assert node.release(P, "alice", ["user:a", "user:b", "page:1"]) == 3
    assert held_names(r) == ["user:a", "user:b"] and r.smembers(K.todo) == {"page:1"}
    assert r.scard(K.limited_in) == 0 and r.hget(K.stats, "items_released") == "3"
    assert_each_once(r, ["user:a", "user:b", "page:1"])
    first = claim(engine)
    assert len(first) == 2 and "page:1" in first
    assert claim(engine) == []
    served = [x for x in first if x != "page:1"] + drain_held(engine, clock, 1, 60)
    assert sorted(served) == ["user:a", "user:b"]
    assert_each_once(r, ["user:a", "user:b", "page:1"])


def test_admin_release_holds_limited_items(project, engine, r, ctx):
    add(ctx, ["user:a", "page:1"])
    claim(engine)
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    assert claim_verbs.release(ctx, P, pattern="*")["released"] == 2
    assert held_names(r) == ["user:a"] and r.smembers(K.todo) == {"page:1"}
    assert_each_once(r, ["user:a", "page:1"])


def test_requeued_dead_items_are_held_unless_for_a_downloader(project, engine, clock, r, ctx):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "1", "max_reclaims": "1"})
    names = ["user:a", "user:b", "user:c", "page:1"]
    add(ctx, names)
    claim(engine)
    clock.advance(1.5)
    claim(engine, who=("bob", "10.0.0.2"))
    clock.advance(2.5)
    assert claim(engine) == [] and r.hlen(K.dead) == 4
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    assert dead_verbs.requeue(ctx, P, ["user:a", "user:b", "page:1", "ghost"]) == {"requeued": 3}
    assert held_names(r) == ["user:a", "user:b"] and r.smembers(K.todo) == {"page:1"}
    # A downloader's own queue takes limited items as they are, and is registered.
    assert dead_verbs.requeue(ctx, P, ["user:c"], "downloader:carol") == {"requeued": 1}
    assert r.smembers(K.downloader_queue("carol")) == {"user:c"}
    assert census_verbs.status(ctx, P)["queues"]["downloader"] == {"carol": 1}
    assert_each_once(r, names)
    assert r.hget(K.stats, "items_requeued_dead") == "4"
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "0"})
    first = claim(engine)
    assert len(first) == 2 and "page:1" in first and claim(engine) == []
    drain_held(engine, clock, 1, 60)


def test_moved_items_are_held_in_a_shared_queue_not_in_a_downloader_queue(project, engine, clock, r, ctx):
    add(ctx, ["user:a", "user:b", "page:1"], queue="secondary")
    add(ctx, ["user:c"], queue="redo")
    limit_verbs.add(ctx, P, "users", "type:user", "1/m", reclassify=False)
    assert item_verbs.move(ctx, P, "secondary", "todo")["moved"] == 3
    assert held_names(r) == ["user:a", "user:b"] and r.smembers(K.todo) == {"page:1"}
    assert not r.exists(K.secondary)
    assert item_verbs.move(ctx, P, "redo", "downloader:alice")["moved"] == 1
    assert r.smembers(K.downloader_queue("alice")) == {"user:c"}
    assert r.sismember(K.downloader_queues, "alice")
    assert_each_once(r, ["user:a", "user:b", "user:c", "page:1"])
    first = claim(engine)
    assert len(first) == 3 and {"page:1", "user:c"} < set(first) and claim(engine) == []
    drain_held(engine, clock, 1, 60)
    assert_each_once(r, ["user:a", "user:b", "user:c", "page:1"])


def test_item_status_reports_held_items_as_todo(project, engine, r, redis_url, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    add(ctx, ["user:a", "user:b"])
    assert engine.item_status(P, "user:a") == ("todo", None)
    r.sadd(K.limited_in, "users\0user:in")  # between bloom_add and hold_limited
    assert engine.item_status(P, "user:in") == ("todo", None)
    r.srem(K.limited_in, "users\0user:in")
    assert engine.item_status(P, "user:zzz") == (None, None)
    # Held under a limit that no longer matches it (removed; its items wait for the next
    # claim): a node with the current limits still finds it, through limits_ready.
    limit_verbs.add(ctx, P, "pages", "type:page", "1/m")
    add(ctx, ["page:1"])
    limit_verbs.remove(ctx, P, "pages")
    node = Engine(redis_url)
    assert node.limits(P).name_of("page:1") is None
    assert r.zscore(K.limited, "pages\0page:1") is not None
    assert node.item_status(P, "page:1") == ("todo", None)
    assert node.item_status(P, "user:b") == ("todo", None)
    assert node.item_status(P, "page:2") == (None, None)


def test_done_for_a_held_item_is_not_lost_nor_counted_twice(project, engine, clock, r, ctx):
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    add(ctx, ["user:a", "user:b"])
    first = claim(engine)
    other = ({"user:a", "user:b"} - set(first)).pop()
    # A done for the item still held (never claimed) finds it in none of the places done looks
    # in: recorded as unknown, it stays held and counts nothing.
    result = engine.done(P, "alice", "1", [other], [], "x")
    assert (result.new, result.unknown) == (0, 1)
    assert held_names(r) == [other] and "items_done" not in totals(r, K.stats)
    assert_each_once(r, ["user:a", "user:b"])
    assert engine.done(P, "alice", "1", first, [], "y").new == 1
    clock.advance(60)
    assert claim(engine) == [other]
    assert engine.done(P, "alice", "1", [other], [], "z").new == 1
    assert totals(r, K.stats)["items_done"] == 2 and r.smembers(K.done) == {"user:a", "user:b"}
    assert_each_once(r, ["user:a", "user:b"])


def test_held_entries_and_split_entries():
    compiled = pattern_limits.CompiledLimits([pattern_limits.Limit("users", "type:user", "1/s", 1.0, 1)])
    assert pattern_limits.held_entries(compiled, ["user:a", "page:1"]) == ["users\0user:a", ""]
    assert pattern_limits.held_entries(None, ["user:a"]) == [""]
    groups = pattern_limits.split_entries(
        [b"user:a\x1fp", b"x\x1fq"], [b"user:a", b"x"], ["users", None], None, K
    )
    assert groups == [([b"x\x1fq"], [b"x"], None), ([b"users\0user:a\x1fp"], [b"user:a"], K.limited_in)]
    assert pattern_limits.split_entries(["user:a", "b"], ["user:a", "b"], ["users", None], K.todo, K) == [
        (["b"], ["b"], K.todo),
        (["users\0user:a"], ["user:a"], K.limited_in),
    ]


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
