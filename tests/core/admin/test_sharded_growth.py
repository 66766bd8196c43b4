"""Adding shards to a sharded project (docs/sharding.md, "Adding shards"): the items stay where
they are and are still claimed, done, released, looked up and deduplicated there; new items
spread over every shard."""

from __future__ import annotations

import zlib

import pytest

from tracker_core.admin import backfeed_verbs, census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.errors import BadInput
from tracker_core.items import bloom
from tracker_core.items.backfeed import Backfeed
from tracker_core.project.shard_layout import MAX_SHARDS

P = "growing"
OLD = [f"https://old.example.net/{i}?p=%20{i}#x y" for i in range(40)]
NEW = [f"https://new.example.net/{i}/a b?q={i}" for i in range(40)]


def crc(name: str) -> int:
    return zlib.crc32(name.encode())


@pytest.fixture
def grown(admin):
    project_verbs.create(admin, P, {"title": "T"}, shards=2)
    item_verbs.add(admin, P, OLD)
    limit_verbs.block(admin, "name:mallory", P)
    limit_verbs.add(admin, P, "slow", "domain:slow.example.net", "1/s")
    secret = backfeed_verbs.create_secret(admin, P)["secret"]
    assert project_verbs.grow(admin, P, 3) == {"project": P, "shards": 3, "before": 2}
    return secret


def test_old_items_stay_and_new_ones_spread_over_every_shard(admin, r, grown):
    layout = admin.layout(P)
    assert (layout.count, layout.generations) == (3, (2,))
    for name in OLD:
        assert r.sismember(layout.keys[crc(name) % 2].todo, name)
    item_verbs.add(admin, P, NEW)
    for name in NEW:
        assert r.sismember(layout.keys[crc(name) % 3].todo, name)
    assert census_verbs.status(admin, P)["todo_total"] == 80


def test_the_new_shard_holds_the_settings_blocks_limits_and_secrets(admin, r, engine, grown):
    third = admin.layout(P).keys[2]
    assert r.hget(third.settings, "title") == "T"
    assert r.hget(admin.layout(P).keys[0].settings, "created_ms") == r.hget(third.settings, "created_ms")
    assert r.hexists(third.limits, "slow")
    assert r.hlen(third.backfeed_secrets) == 1
    assert engine.claim(P, "mallory", "10.0.0.9", 5) == (403, [])


def test_old_items_are_claimed_done_and_released_where_they_live(admin, engine, r, grown):
    item_verbs.add(admin, P, NEW)
    claimed = []
    while True:
        code, names = engine.claim(P, "alice", "10.0.0.1", 20)
        if code != 200:
            break
        claimed += names
    assert sorted(claimed) == sorted(OLD + NEW)
    old_moved = [n for n in OLD if crc(n) % 3 != crc(n) % 2]
    assert old_moved  # some old items would be added elsewhere today
    assert engine.release(P, "alice", old_moved[:3]) == 3
    reply = engine.done(P, "alice", "v1", [n for n in claimed if n not in old_moved[:3]], [], "{}")
    assert (reply.new, reply.unknown) == (77, 0)
    assert engine.item_status(P, old_moved[0])[0] == "todo"
    assert engine.item_status(P, old_moved[5]) == ("done", None)
    status = census_verbs.status(admin, P)
    assert (status["done"], status["todo_total"], status["out"]) == (77, 3, 0)


def test_an_old_name_posted_again_is_a_duplicate(admin, engine, r, grown):
    moved = [n for n in OLD if crc(n) % 3 != crc(n) % 2]
    assert item_verbs.add(admin, P, moved) == {"added": 0, "duplicates": len(moved)}
    outcome = Backfeed(engine).submit(P, grown, moved + NEW[:5], moved + NEW[:5])
    assert (outcome.status, outcome.new, outcome.seen) == (bloom.OK, 5, len(moved))
    assert census_verbs.status(admin, P)["todo_total"] == 45


def test_growing_twice_keeps_every_generation(admin, engine, grown):
    project_verbs.grow(admin, P, 5)
    layout = admin.layout(P)
    assert (layout.count, layout.generations) == (5, (2, 3))
    claimed = []
    while (reply := engine.claim(P, "alice", "10.0.0.1", 50))[0] == 200:
        claimed += reply[1]
    assert sorted(claimed) == sorted(OLD)
    assert engine.done(P, "alice", "v1", claimed, [], "{}").new == 40


@pytest.mark.parametrize("shards", [1, 2, MAX_SHARDS + 1, "3"])
def test_shards_can_only_be_added_up_to_the_maximum(admin, r, grown, shards):
    before = {key: r.type(key) for key in r.scan_iter()}
    with pytest.raises(BadInput, match="shard"):
        project_verbs.grow(admin, P, shards)
    assert {key: r.type(key) for key in r.scan_iter()} == before


def test_a_one_shard_project_grows_too(admin, engine):
    project_verbs.create(admin, "single")
    item_verbs.add(admin, "single", OLD[:10])
    project_verbs.grow(admin, "single", MAX_SHARDS)
    claimed = []
    while (reply := engine.claim("single", "alice", "10.0.0.1", 50))[0] == 200:
        claimed += reply[1]
    assert sorted(claimed) == sorted(OLD[:10])
    assert engine.done("single", "alice", "v1", claimed, [], "{}").new == 10
