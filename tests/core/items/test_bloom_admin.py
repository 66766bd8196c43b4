"""The backfeed filter admin verb: a filter's kind is chosen while it is empty, shown, audited."""

import json

import pytest

from tracker_core import keyspace
from tracker_core.admin import backfeed_verbs, project_verbs
from tracker_core.admin.errors import BadInput, Conflict
from tracker_core.items import bloom, bloom_geometry, bloom_membership, intake
from tracker_core.keyspace import ProjectKeys

P = "bfadmin"
NAMES = [f"https://example.com/item/{i}?q=%20x#frag {i}" for i in range(50)]


def test_a_new_filter_is_layered_and_an_empty_one_can_be_made_wide(admin, r):
    project_verbs.create(admin, P)
    shown = backfeed_verbs.bloom_filter(admin, P)
    assert shown["kind"] == bloom.DEFAULT_KIND == "layered" and shown["layers"][0]["k"] == 20
    wide = backfeed_verbs.bloom_filter(admin, P, kind="wide")
    assert wide["kind"] == "wide" and wide["layers"][0]["k"] == 10
    assert wide["bits_per_item_at_capacity"] == 35
    audited = [fields for _, fields in r.xrange(keyspace.AUDIT) if fields["action"] == "backfeed.filter"]
    assert [json.loads(fields["detail"])["kind"] for fields in audited] == ["wide"]
    assert intake.add_names(admin.conn, ProjectKeys(P), NAMES + NAMES[:5]) == {"added": 50, "duplicates": 5}
    with pytest.raises(Conflict, match="already holds items"):
        backfeed_verbs.bloom_filter(admin, P, kind="layered")
    assert backfeed_verbs.bloom_filter(admin, P)["kind"] == "wide"


def test_an_unknown_kind_is_refused_and_changes_nothing(admin, r):
    project_verbs.create(admin, P)
    with pytest.raises(BadInput, match="kind"):
        backfeed_verbs.bloom_filter(admin, P, kind="blocked")
    assert not r.exists(ProjectKeys(P).bloom)


def test_a_fingerprint_filter_shows_its_fingerprint_size_and_dedups(admin, r):
    project_verbs.create(admin, P)
    shown = backfeed_verbs.bloom_filter(admin, P, kind="fingerprint")
    assert shown["kind"] == "fingerprint" and shown["layers"][0]["fingerprint_bytes"] == 3
    # A new fingerprint filter is blocked: its table leaves 0.2% of 35 bits to its stash.
    assert shown["layers"][0]["capacity"] and 34.9 < shown["bits_per_item_at_capacity"] <= 35
    assert intake.add_names(admin.conn, ProjectKeys(P), NAMES + NAMES[::-1]) == {
        "added": 50,
        "duplicates": 50,
    }
    assert r.scard(ProjectKeys(P).todo) == 50


@pytest.mark.parametrize("kind", bloom.KINDS)
def test_seen_by_reads_every_kind_through_the_admin_connection_and_writes_nothing(admin, r, kind):
    """What redo asks before it re-queues a name (tracker_core.admin.item_verbs.seen_by_filter)."""
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    assert bloom_membership.seen_by(admin.conn, k, NAMES[:3]) == [False] * 3 and not r.exists(k.bloom)
    backfeed_verbs.bloom_filter(admin, P, kind=kind)
    intake.add_names(admin.conn, k, NAMES[:30])
    before = {key: r.dump(key) for key in r.scan_iter("*")}
    wired = [name.encode() for name in NAMES]
    assert bloom_membership.seen_by(admin.conn, k, wired) == [True] * 30 + [False] * 20
    assert {key: r.dump(key) for key in r.scan_iter("*")} == before


@pytest.mark.parametrize("kind", bloom_geometry.KINDS)
def test_the_rate_at_a_layers_fill_meets_its_target_at_capacity_and_grows_past_it(kind):
    """What the admin pages show as a filter's rate now (bloom_geometry.rate_at)."""
    layer = bloom_geometry.Geometry(kind=kind).layer(0)

    def rate(items):
        return bloom_geometry.rate_at(kind, layer.k, layer.bits, layer.slot_bytes, items)

    assert rate(0) == 0.0
    assert layer.fp_rate / 2 < rate(layer.capacity) <= layer.fp_rate * 1.001
    assert rate(layer.capacity // 2) < rate(layer.capacity) < rate(2 * layer.capacity)


def test_the_capacity_and_the_first_layer_s_memory_are_bounded_before_anything_is_written(admin, r):
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    for capacity in (0, bloom_geometry.MAX_CAPACITY + 1, 10**30, "5"):
        with pytest.raises(BadInput, match="'capacity' must be an integer from 1 to 1,000,000,000"):
            backfeed_verbs.bloom_filter(admin, P, capacity=capacity)
    # A billion names at 1e-6 is 3.4 GiB of layered first layer: taken; at 1e-9, 5 GiB: refused.
    with pytest.raises(BadInput, match=r"would take 5\.\d GiB of Redis memory, more than 4 GiB"):
        backfeed_verbs.bloom_filter(admin, P, capacity=bloom_geometry.MAX_CAPACITY, fp_rate=1e-9)
    assert not r.exists(k.bloom)
    shown = backfeed_verbs.bloom_filter(admin, P, capacity=bloom_geometry.MAX_CAPACITY, fp_rate=1e-6)
    assert shown["capacity"] == bloom_geometry.MAX_CAPACITY
    assert shown["layers"][0]["bytes"] <= bloom_geometry.MAX_FIRST_LAYER_BYTES
    assert r.memory_usage(k.bloom) < 10_000  # the geometry is stored, no bit of it allocated yet


def test_a_sharded_project_s_filter_is_shown_whole(admin, r):
    project_verbs.create(admin, "bfshards", shards=3)
    layout = admin.layout("bfshards")
    shown = backfeed_verbs.bloom_filter(admin, "bfshards", capacity=3000, kind="fingerprint")
    assert shown["capacity"] == 3000 and shown["shards"] == 3
    assert [r.hget(k.bloom, "capacity") for k in layout.keys] == ["1000"] * 3
    intake.add(admin.conn, layout.keys[0], NAMES, layout=layout).__next__()
    shown = backfeed_verbs.bloom_filter(admin, "bfshards")
    assert shown["items"] == 50 == sum(layer["items"] for layer in shown["layers"])
    assert {layout.shard_of(n) for n in NAMES} == {0, 1, 2}  # every shard counted, not the first
    assert shown["layers"][0]["capacity"] == 3000 and "stashed" in shown["layers"][0]
