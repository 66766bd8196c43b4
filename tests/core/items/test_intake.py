"""The one intake (tracker_core.items.intake): items add, backfeed and segment import pass the same
classify, split, Bloom filter, enqueue and hold."""

import pytest

from tracker_core.admin import limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.items import bloom, intake
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import pattern_limits

P = "intake"
K = ProjectKeys(P)
FREE = [f"https://free.example/{i} a?b=%20#c" for i in range(5)]
HELD = [f"https://slow.example/{i}/x?y#z" for i in range(3)]


@pytest.fixture
def ctx(redis_url):
    c = AdminContext.from_url(redis_url, actor="test")
    project_verbs.create(c, P)
    limit_verbs.add(c, P, "slow", "domain:slow.example", "1/m")
    return c


def test_a_batch_splits_into_free_and_held_and_the_filter_dedups_both(ctx, r):
    seen_filter = bloom.BloomFilter(r, K)
    compiled = pattern_limits.CompiledLimits(pattern_limits.load(r, K))
    names = FREE + HELD + FREE[:1] + HELD[:1]  # copies in one batch: still one each
    batch = intake.enqueue(seen_filter, K, names, names, K.todo, "", compiled)
    assert (batch.status, batch.new, batch.seen, batch.held) == (bloom.OK, 8, 2, 3)
    assert r.smembers(K.todo) == set(FREE)
    assert r.smembers(K.limited_in) == {pattern_limits.held_entry("slow", n) for n in HELD}
    again = intake.enqueue(seen_filter, K, names, names, K.todo, "", compiled)
    assert (again.new, again.seen, again.held) == (0, 10, 0)


def test_a_downloaders_own_queue_holds_nothing(ctx, r):
    compiled = pattern_limits.CompiledLimits(pattern_limits.load(r, K))
    target = K.downloader_queue("alice")
    batch = intake.enqueue(bloom.BloomFilter(r, K), K, HELD, HELD, target, "alice", compiled)
    assert (batch.new, batch.held) == (3, 0) and r.smembers(target) == set(HELD)


def test_add_holds_limited_names_and_refuses_names_that_are_not_utf8(ctx, r):
    bad = b"https://x/\xff".decode("utf-8", "surrogateescape")
    refused: dict = {}
    batches = list(intake.add(r, K, FREE + [bad, ""] + HELD, batch=4, refused=refused))
    assert batches == [(4, 0), (4, 0)]
    assert refused == {intake.NOT_UTF8: 1} and r.hget(K.stats, "items_refused_not_utf8") == "1"
    assert r.smembers(K.todo) == set(FREE)
    # hold_new filed the held ones in the limit's sub-queue: none left on the way in.
    assert r.zcard(K.limited) == 3 and r.scard(K.limited_in) == 0


def test_add_names_answers_with_counts_and_reports_progress(ctx, r):
    steps = []
    answer = intake.add_names(r, K, FREE + FREE, "secondary", progress=lambda a, d: steps.append((a, d)))
    assert answer == {"added": 5, "duplicates": 5} and steps == [(5, 5)]
    assert r.smembers(K.secondary) == set(FREE)


def test_add_refuses_a_bad_queue_and_a_project_that_is_gone(ctx, r):
    with pytest.raises(BadInput, match="queue"):
        intake.add_names(r, K, FREE, "nowhere")
    project_verbs.delete(ctx, P)
    with pytest.raises(NotFound, match="unknown project"):
        intake.add_names(r, K, FREE)
    assert not r.exists(K.todo)
