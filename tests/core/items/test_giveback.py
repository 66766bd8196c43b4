"""The one give-back (tracker_core.items.giveback): release, dead requeue, queue moves and redo
classify at the settings age, retry when the limits changed meanwhile, and hold."""

import pytest

from tracker_core import scripts
from tracker_core.admin import claim_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items import giveback
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import pattern_limits

P = "back"
K = ProjectKeys(P)
NAMES = [f"https://slow.example/{i}/a b?c=%20#d" for i in range(4)]


@pytest.fixture
def ctx(redis_url):
    c = AdminContext.from_url(redis_url, actor="test")
    project_verbs.create(c, P)
    item_verbs.add(c, P, NAMES)
    return c


def release_call(r, names):
    return lambda age, held: scripts.release(r, K, now_ms=1, downloader="", age=age, items=names, held=held)


def test_a_limit_added_between_classifying_and_the_script_is_applied_on_the_retry(ctx, r, engine):
    status, claimed = engine.claim(P, "alice", "10.0.0.1", 4)
    assert status == 200 and sorted(claimed) == sorted(NAMES)
    classified = []

    def classify():
        age, compiled = pattern_limits.current(r, K)
        if not classified:  # a limit arrives after this first read: the script sees a new age
            pattern_limits.add(r, K, "slow", "domain:slow.example", "1/m")
        classified.append(age)
        return age, compiled

    call = release_call(r, NAMES)
    reply = giveback.give_back(
        r,
        K,
        NAMES,
        call,
        classify=classify,
        held_filed=lambda reply, held: reply.code == 200 and reply.held > 0,
    )
    assert (reply.code, reply.released, reply.held) == (200, 4, 4)
    assert len(classified) == 2 and classified[0] != classified[1]
    # Held by the new limit, and filed in its sub-queue (not left on the way in).
    assert r.scard(K.todo) == 0 and r.zcard(K.limited) == 4 and r.scard(K.limited_in) == 0


def test_the_last_attempt_does_not_check_the_age(ctx, r):
    ages = []

    def call(age, held):
        ages.append(age)
        return [giveback.STALE_AGE, 99]

    reply = giveback.give_back(r, K, NAMES, call, attempts=3)
    assert reply[0] == giveback.STALE_AGE and ages[-1] == "" and all(ages[:2])


def test_a_downloaders_own_queue_takes_items_as_they_are(ctx, r):
    limit_verbs.add(ctx, P, "slow", "domain:slow.example", "1/m", reclassify=False)
    seen = []
    giveback.give_back(r, K, NAMES, lambda age, held: seen.append(held) or 0, owner="alice")
    assert seen == [[""] * len(NAMES)]


def test_release_dead_requeue_and_moves_hold_what_a_limit_matches(ctx, r, engine):
    limit_verbs.add(ctx, P, "slow", "domain:slow.example", "1/m", reclassify=False)
    item_verbs.move(ctx, P, "todo", "secondary")  # a move into a shared queue holds them
    assert r.scard(K.secondary) == 0 and r.zcard(K.limited) == 4
    limit_verbs.remove(ctx, P, "slow")
    r.delete(K.limited)
    r.sadd(K.todo, *NAMES)
    engine.claim(P, "alice", "10.0.0.1", 4)
    limit_verbs.add(ctx, P, "slow", "domain:slow.example", "1/m", reclassify=False)
    assert claim_verbs.release(ctx, P, downloader="alice")["released"] == 4
    assert r.scard(K.todo) == 0 and r.zcard(K.limited) == 4 and r.scard(K.limited_in) == 0


def test_release_over_the_hot_paths_connection_with_its_cached_limits(ctx, r, engine):
    """What Engine.release can call: its raw connection, its cached settings and limits; a stale
    cache is refused by the script, forgotten, and the release made again."""
    engine.claim(P, "alice", "10.0.0.1", 4)
    cached_age = str(engine.settings(P).age)
    limit_verbs.add(ctx, P, "slow", "domain:slow.example", "1/m", reclassify=False)  # after the cache
    stale = []

    def classify():
        age = cached_age if not stale else str(stale[-1].settings_age)  # what the script said
        return age, (None if not stale else pattern_limits.CompiledLimits(pattern_limits.load(r, K)))

    reply = giveback.release(
        engine.conn, K, "alice", NAMES, now_ms=1, classify=classify, on_stale=stale.append
    )
    assert len(stale) == 1 and reply.released == 4 and reply.held == 4
    assert r.zcard(K.limited) == 4 and r.scard(K.todo) == 0
