"""`out` scored by when a claim may be reclaimed, its claim time in the record (docs/data-model.md),
and the claims an older tracker wrote: a record of three fields whose `out` score is the claim
time, and the `reclaim_at` index it kept beside."""

import time

import pytest

from support.projects import new_project
from tracker_core.admin import claim_verbs, item_verbs, project_verbs, upgrades
from tracker_core.admin.context import AdminContext
from tracker_core.items.claim_records import ClaimRecord, parse
from tracker_core.items.engine import Engine
from tracker_core.items.item_status import Owners, lookup
from tracker_core.keyspace import ProjectKeys

P = "due"
K = ProjectKeys(P)
URL = "https://example.com/a b/?q=%20x&r=1#frag/" + "x" * 2000
OLD = "https://example.org/old?claimed=before#the-upgrade"


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)


@pytest.fixture
def project(ctx):
    return new_project(ctx, P, settings={"reclaim_ttl_s": "60"})


def ms(clock) -> int:
    return int(clock.now * 1000)


def old_claim(r, name, holder, claimed_ms, times=1):
    """A claim as a tracker from before claim times were kept wrote it, with its index entry."""
    r.zadd(K.out, {name: claimed_ms})
    r.hset(K.claims, name, f"{holder}\t10.9.9.9\t{times}")
    r.hincrby(K.downloader_claims, holder, 1)
    r.zadd(K.reclaim_at, {name: claimed_ms + 60_000 * times})


def test_a_claim_is_scored_by_its_due_time_and_leaves_nothing_when_done(project, ctx, engine, clock, r):
    item_verbs.add(ctx, P, [URL])
    assert engine.claim(P, "alice", "10.0.0.1", 1) == (200, [URL])
    assert r.zscore(K.out, URL) == ms(clock) + 60_000
    assert parse(r.hget(K.claims, URL)) == ClaimRecord("alice", "10.0.0.1", 1, ms(clock))
    clock.advance(1.5)
    assert engine.done(P, "alice", "1", [URL], [], "{}").new == 1
    # The RTT is counted from the claim time the record kept, not from `out`'s due time.
    assert r.hget(K.stats, "rtt_sum_ms") == "1500"
    assert not r.exists(K.out) and not r.exists(K.claims) and not r.exists(K.reclaim_at)


def test_a_longer_ttl_set_after_the_claim_moves_it_instead_of_reclaiming_it(project, ctx, engine, clock, r):
    item_verbs.add(ctx, P, [URL])
    claimed_ms = ms(clock)
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "600"})
    clock.advance(61)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (404, [])
    assert r.zscore(K.out, URL) == claimed_ms + 600_000
    assert parse(r.hget(K.claims, URL)).downloader == "alice"
    clock.advance(540)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [URL])


def test_a_claim_made_without_a_ttl_is_reclaimed_once_one_is_set(project, ctx, engine, clock, r):
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "0"})
    item_verbs.add(ctx, P, [URL])
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    clock.advance(3600)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (404, [])  # no TTL: never reclaimed
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "60"})
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [URL])  # claimed an hour ago
    assert parse(r.hget(K.claims, URL)) == ClaimRecord("bob", "10.0.0.2", 2, ms(clock))


def test_an_old_claim_is_not_reclaimed_early_and_is_moved_to_its_due_time(project, engine, clock, r):
    # Scored by its claim time, it is in the reclaim range 60 s before it is due (2 claims).
    claimed_ms = ms(clock) - 70_000
    old_claim(r, OLD, "carol", claimed_ms, times=2)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (404, [])
    assert r.zscore(K.out, OLD) == claimed_ms + 120_000
    assert parse(r.hget(K.claims, OLD)) == ClaimRecord("carol", "10.9.9.9", 2, claimed_ms)
    clock.advance(49)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (404, [])
    clock.advance(2)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [OLD])
    assert parse(r.hget(K.claims, OLD)) == ClaimRecord("bob", "10.0.0.2", 3, ms(clock))
    assert r.hgetall(K.downloader_claims) == {"bob": "1"}


def test_an_old_claim_that_is_due_is_reclaimed_and_one_done_counts_its_rtt(project, engine, clock, r):
    old_claim(r, OLD, "carol", ms(clock) - 61_000)
    old_claim(r, URL, "dave", ms(clock) - 2_500)
    assert engine.claim(P, "bob", "10.0.0.2", 5) == (200, [OLD])
    assert engine.done(P, "dave", "1", [URL], [], "{}").new == 1
    assert r.hget(K.stats, "rtt_sum_ms") == "2500"  # from `out`, which held its claim time
    assert r.hgetall(K.downloader_claims) == {"bob": "1"}


def test_item_status_and_the_claims_listing_read_both_records(project, ctx, engine, clock, r):
    old_claim(r, OLD, "carol", ms(clock) - 5_000, times=3)
    item_verbs.add(ctx, P, [URL])
    assert engine.claim(P, "alice", "10.0.0.1", 1) == (200, [URL])
    rows = {row["item"]: row for row in claim_verbs.list_claims(ctx, P)["claims"]}
    assert rows[URL] == {
        "item": URL,
        "downloader": "alice",
        "ip": "10.0.0.1",
        "times_claimed": 1,
        "claimed_at_ms": ms(clock),
    }
    assert (rows[OLD]["downloader"], rows[OLD]["times_claimed"], rows[OLD]["claimed_at_ms"]) == (
        "carol",
        3,
        ms(clock) - 5_000,
    )
    status = lookup(engine.conn, K, OLD, Owners())
    assert (status["status"], status["downloader"], status["claims"]) == ("out", "carol", 3)
    status = lookup(engine.conn, K, URL, Owners())
    assert (status["status"], status["downloader"], status["claims"]) == ("out", "alice", 1)


def test_release_by_age_goes_by_claim_time_not_by_due_time(project, ctx, redis_url, r):
    # Real time: the admin's age is measured against the wall clock. A claim reclaimed twice is
    # due last though it was claimed first; an old record's age comes from `out`.
    now_ms = int(time.time() * 1000)
    engine = Engine(redis_url, clock=lambda: now_ms / 1000)
    names = [f"{URL}&n={n}" for n in range(5)]
    item_verbs.add(ctx, P, names)
    assert engine.claim(P, "alice", "10.0.0.1", 5)[0] == 200
    r.hset(K.claims, names[0], f"alice\t10.0.0.1\t3\t{now_ms - 3_600_000}")
    r.zadd(K.out, {names[0]: now_ms - 3_600_000 + 3 * 60_000})
    old_claim(r, OLD, "carol", now_ms - 7_200_000)
    # Pages of 2 over 6 claims, by rank in `out`: every claim an hour old or more, and no other.
    released, cursor, pages = 0, 0, 0
    while True:
        page = claim_verbs.release(ctx, P, older_than_s=1800, cursor=cursor, limit=2)
        released, cursor, pages = released + page["released"], page["cursor"], pages + 1
        if cursor == 0:
            break
    assert released == 2 and pages == 4  # the third page was full: a fourth finds none
    assert sorted(r.zrange(K.out, 0, -1)) == sorted(names[1:])
    assert r.sismember(K.todo, OLD) and r.sismember(K.todo, names[0])
    assert claim_verbs.release_all(ctx, P, older_than_s=0) == {"released": 4}
    assert r.zcard(K.out) == 0 and r.scard(K.todo) == 6


def test_maintain_drops_the_reclaim_index_of_every_project(project, ctx, engine, clock, r):
    project_verbs.create(ctx, "other")
    other = ProjectKeys("other")
    old_claim(r, OLD, "carol", ms(clock) - 1_000)
    r.zadd(other.reclaim_at, {"x": 1})
    assert upgrades.drop_reclaim_index(ctx) == {"dropped": 2}
    assert not r.exists(K.reclaim_at) and not r.exists(other.reclaim_at)
    assert upgrades.drop_reclaim_index(ctx) == {"dropped": 0}
    # The claim is still out and still reclaimed when due.
    clock.advance(60)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [OLD])


def test_a_release_reads_the_times_claimed_not_the_claim_time(project, ctx, engine, clock, r):
    # The record's last field is the claim time now: taken for the times claimed, every release
    # would clear a reclaim history that a claim made once cannot have (one HDEL more).
    item_verbs.add(ctx, P, [URL, OLD])
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    r.config_resetstat()
    assert engine.release(P, "alice", [URL, OLD]) == 1
    hdel = r.info("commandstats")["cmdstat_hdel"]["calls"]
    assert hdel == 2  # the claim, and the holder's count that fell to 0
    assert r.smembers(K.todo) == {URL, OLD} and not r.exists(K.out)
