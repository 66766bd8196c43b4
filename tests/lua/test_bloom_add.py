"""bloom_add-n.lua: a batch's unseen items are queued and marked seen; seen ones are dropped."""

import pytest

from tracker_core import scripts
from tracker_core.items import bloom, bloom_geometry, bloom_plan


def add(conn, k, entries, secret_digest="", bound=0, last_capacity=None):
    fields = scripts.bloom_configure(
        conn, k, capacity=1000, fp_rate="0.001", growth=2, tightening="0.5", chunk_bits=4096, replace=False
    )
    plan = bloom.Plan(k, bloom.Geometry.from_redis(fields))
    wired = [e.encode() for e in entries]
    return scripts.bloom_add(
        conn,
        k,
        chunk_keys=plan.chunk_keys,
        target=k.todo,
        counted=k.limited_in,
        layers=len(plan.layers),
        last_capacity=plan.layers[-1].capacity if last_capacity is None else last_capacity,
        owner="",
        secret_digest=secret_digest,
        shard="",
        new_field="items_added",
        seen_field="items_duplicate",
        count=len(entries),
        bound=bound,
        ks=plan.ks,
        hashed=bloom_plan.script_args(wired, wired, plan.hash_plan),
    )


def test_bloom_add_queues_each_item_once(conn, project, r, names):
    assert add(conn, project, names[:2]) == (scripts.bloom_add.codes.OK, 2, 0)
    assert r.smembers(project.todo) == set(names[:2])
    r.delete(project.todo)  # claimed and done since: the filter still knows them
    assert add(conn, project, names) == (scripts.bloom_add.codes.OK, 1, 2)
    assert r.smembers(project.todo) == {names[2]}
    assert r.hget(project.stats, "items_added") == "3" and r.hget(project.stats, "items_duplicate") == "2"


def test_bloom_add_refusals_queue_nothing(conn, project, r, names):
    assert (
        add(conn, project, names, secret_digest="no-such-secret").code == scripts.bloom_add.codes.WRONG_SECRET
    )
    assert add(conn, project, names, bound=1).code == scripts.bloom_add.codes.FULL
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"


def test_a_capacity_that_is_not_a_number_refuses_before_any_write(conn, project, r, names):
    """ARGV[2] (the last layer's capacity) used to be read after the items were queued, so a bad
    one failed the script with its writes kept."""
    import pytest

    from tracker_core.scripts import ScriptError

    with pytest.raises(ScriptError, match="capacity"):
        add(conn, project, names, last_capacity="not-a-number")
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"


# -- one BITFIELD per layer and batch (issue 16): the same answers as one GETBIT per bit -----------


def urls(n: int, tag: str = "") -> list[str]:
    return [f"https://example.com/{tag}page/{i}/item?q=%20x&r={i}#frag {i}" for i in range(n)]


def call(conn, k, entries, geometry, **overrides):
    """bloom_add over ENTRIES with the filter's geometry in force (GEOMETRY configures it first)."""
    scripts.bloom_configure(conn, k, replace=False, **geometry)
    plan = bloom.Plan(k, bloom.Geometry.from_redis(conn.hgetall(k.bloom)))
    wired = [e.encode() for e in entries]
    arguments = dict(
        chunk_keys=plan.chunk_keys,
        target=k.todo,
        counted=k.limited_in,
        layers=len(plan.layers),
        last_capacity=plan.layers[-1].capacity,
        owner="",
        secret_digest="",
        shard="",
        new_field="items_added",
        seen_field="items_duplicate",
        count=len(entries),
        bound=0,
        kind=plan.geometry.planned_kind,
        ks=plan.ks,
        hashed=plan.args(wired, wired),
    )
    return scripts.bloom_add(conn, k, **{**arguments, **overrides}), plan


WIDE = dict(capacity=1000, fp_rate="0.000001", growth=2, tightening="0.1", chunk_bits=2**20, kind="wide")


def test_a_name_repeated_across_one_batchs_bitfield_calls_is_queued_once(conn, project, r):
    """400 items of k = 10 take more than one BITFIELD call (7,000 arguments at most): the copy
    in a later call finds the bits the first copy set."""
    batch = urls(399) + ["https://example.com/page/0/item?q=%20x&r=0#frag 0"]
    reply, plan = call(conn, project, batch, WIDE)
    assert plan.ks == [10] and len(batch) * 4 * 10 > 7000
    assert reply == (scripts.bloom_add.codes.OK, 399, 1)
    assert r.scard(project.todo) == 399 and r.hget(project.stats, "items_duplicate") == "1"
    assert call(conn, project, batch[::-1], WIDE)[0] == (scripts.bloom_add.codes.OK, 0, 400)


def test_names_in_an_older_layer_are_seen_and_new_ones_set_only_in_the_last(conn, project, r):
    small = dict(WIDE, capacity=50)
    assert call(conn, project, urls(50, "old/"), small)[0] == (scripts.bloom_add.codes.OK, 50, 0)
    assert r.hget(project.bloom, "layers") == "2"
    last = project.bloom_chunk(1, 0)
    reply, plan = call(conn, project, urls(50, "old/")[::5] + urls(20, "new/"), small)
    assert len(plan.layers) == 2 and reply == (scripts.bloom_add.codes.OK, 20, 10)
    # Only the 20 new names' bits went into the last layer: 10 per name at most.
    assert 0 < r.bitcount(last) <= 20 * plan.ks[1]
    assert r.hget(project.bloom, "n:1") == "20" and r.scard(project.todo) == 70


def test_a_chunk_of_the_wrong_type_fails_before_any_bit_is_set(conn, project, r):
    """With several chunks the script makes several BITFIELD calls: a bad chunk must fail before
    the first of them writes (Redis keeps a failed script's writes)."""
    import pytest

    from tracker_core.scripts import ScriptError

    chunked = dict(WIDE, chunk_bits=4096)
    _, plan = call(conn, project, [], chunked)
    assert len(plan.chunk_keys) > 2
    r.rpush(plan.chunk_keys[-1], "not a bitmap")
    with pytest.raises(ScriptError):
        call(conn, project, urls(300), chunked)
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"
    assert all(r.bitcount(key) == 0 for key in plan.chunk_keys[:-1])


def test_arguments_that_do_not_match_the_layers_fail_before_any_write(conn, project, r):
    import pytest

    from tracker_core.scripts import ScriptError

    _, plan = call(conn, project, [], WIDE)
    with pytest.raises(ScriptError, match="ARGV"):
        call(conn, project, urls(3), WIDE, count=4)
    assert not r.exists(project.todo) and not r.exists(plan.chunk_keys[0])


# -- fingerprint filters: two buckets per item, a stash when both are full -------------------------

# Fingerprint filters made before blocks (independent bucket pairs: every such filter stored keeps
# them), and new ones (blocked: an item's two buckets are two of one block of 16).
FINGERPRINTS = dict(WIDE, kind="fingerprint")
BLOCKED = dict(FINGERPRINTS, block=16)
BOTH = pytest.mark.parametrize("fingerprints", [FINGERPRINTS, BLOCKED], ids=["pairs", "blocked"])


@BOTH
def test_a_fingerprint_filter_queues_each_url_once(conn, project, r, fingerprints):
    batch = urls(300) + urls(300)[::-1][:40]
    reply, plan = call(conn, project, batch, fingerprints)
    assert plan.ks == [3] and reply == (scripts.bloom_add.codes.OK, 300, 40)
    assert plan.blocked == ("block" in fingerprints)
    assert r.smembers(project.todo) == set(urls(300))
    assert call(conn, project, urls(300)[::7] + urls(30, "more/"), fingerprints)[0] == (
        scripts.bloom_add.codes.OK,
        30,
        43,
    )
    # 330 fingerprints of 3 bytes in the one chunk's buckets (its string no longer than they are),
    # nothing stashed.
    assert 0 < r.strlen(plan.chunk_keys[0]) <= plan.layers[0].buckets * 3 * bloom_geometry.BUCKET_SLOTS
    assert not r.exists(plan.chunk_keys[-1])


def crowded(plan, layer: int, n: int, tag: str) -> list[str]:
    """N URLs with the same two buckets in LAYER (what an attacker who knows the hash can post):
    with independent pairs, its chunk's first bucket twice; blocked, its first two buckets."""
    found, i = [], 0
    bucket = plan.layers[layer].slot_bytes * bloom_geometry.BUCKET_SLOTS
    while len(found) < n:
        name = urls(1, f"{tag}{i}/")[0]
        args = plan.hashed([b""], [name.encode()], [plan.hash_plan[layer]])
        if args[1:3] == [0, 2 * bucket - 1] if plan.blocked else args[2] == args[4] == 0:
            found.append(name)
        i += 1
    return found


@BOTH
def test_items_whose_buckets_are_full_go_to_the_stash_and_are_found_there(
    conn, project, r, redis_url, fingerprints
):
    """Names whose buckets are the same: 8 fill one bucket (pairs: 12 names of one bucket twice)
    or 16 two (blocked: 20 names), 4 are stashed, in each layer, and every name is seen
    afterwards (the stash is read when both buckets are full)."""
    shape = dict(fingerprints, capacity=60)
    _, plan = call(conn, project, [], shape)
    crowd = 20 if plan.blocked else 12
    first = crowded(plan, 0, crowd, "a")
    assert call(conn, project, first, shape)[0] == (scripts.bloom_add.codes.OK, crowd, 0)
    assert r.scard(project.bloom_stash(0)) == 4 and plan.chunk_keys[-1] == project.bloom_stash(0)
    fill = 60 - crowd
    assert call(conn, project, urls(fill, "fill/"), shape)[0] == (scripts.bloom_add.codes.OK, fill, 0)
    _, plan = call(conn, project, [], shape)
    assert len(plan.layers) == 2
    second = crowded(plan, 1, crowd, "b")
    again, plan = call(conn, project, first[::-1] + second, shape)
    assert again == (scripts.bloom_add.codes.OK, crowd, crowd) and r.scard(project.bloom_stash(1)) == 4
    from tracker_core.infra.rawredis import RawRedis

    filt = bloom.BloomFilter(RawRedis(redis_url), project)
    assert all(filt.contains_many([u.encode() for u in first + second + urls(fill, "fill/")]))
    assert not any(filt.contains_many([u.encode() for u in urls(50, "absent/")]))


@pytest.mark.parametrize("shape", [WIDE, FINGERPRINTS, BLOCKED], ids=["wide", "pairs", "blocked"])
def test_a_batch_that_would_pass_the_layers_capacity_is_sent_back_cut_where_it_fills(conn, project, r, shape):
    small = dict(shape, capacity=60)
    assert call(conn, project, urls(50), small)[0] == (scripts.bloom_add.codes.OK, 50, 0)
    # 5 seen names, then new ones: the 10th new name (the batch's 15th) fills the layer.
    assert call(conn, project, urls(5) + urls(20, "new/"), small)[0] == (scripts.bloom_add.codes.SPLIT, 15, 0)
    assert r.scard(project.todo) == 50 and r.hget(project.bloom, "n:0") == "50"
    assert call(conn, project, urls(5) + urls(10, "new/"), small)[0] == (scripts.bloom_add.codes.OK, 10, 5)
    assert r.hget(project.bloom, "layers") == "2"


@BOTH
def test_a_fingerprint_chunk_or_stash_of_the_wrong_type_fails_before_any_write(
    conn, project, r, fingerprints
):
    import pytest

    from tracker_core.scripts import ScriptError

    _, plan = call(conn, project, [], fingerprints)
    for wrong in (plan.chunk_keys[-1], plan.chunk_keys[0]):
        r.delete(*plan.chunk_keys)
        r.set(wrong, "x") if wrong == plan.chunk_keys[-1] else r.rpush(wrong, "not a bitmap")
        with pytest.raises(ScriptError):
            call(conn, project, urls(20), fingerprints)
        assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"
        assert [key for key in plan.chunk_keys if r.exists(key)] == [wrong]


def test_a_call_planned_for_another_kind_is_sent_back_to_replan(conn, project, r):
    _, plan = call(conn, project, [], FINGERPRINTS)
    assert (
        call(conn, project, urls(5), FINGERPRINTS, kind="layered")[0].code
        == scripts.bloom_add.codes.LAYERS_CHANGED
    )
    assert not r.exists(project.todo) and not r.exists(plan.chunk_keys[0])


def test_a_call_planned_for_the_other_fingerprint_layout_is_sent_back_to_replan(conn, project, r):
    """A caller that planned independent pairs for a blocked filter (or the other way, or another
    block) sends arguments of another shape: the script refuses before reading them."""
    _, plan = call(conn, project, [], BLOCKED)
    assert r.hget(project.bloom, "block") == "16" and plan.geometry.planned_kind == "fingerprint:16"
    for planned in ("fingerprint", "fingerprint:8"):
        assert (
            call(conn, project, urls(5), BLOCKED, kind=planned)[0].code
            == scripts.bloom_add.codes.LAYERS_CHANGED
        )
    assert not r.exists(project.todo) and not r.exists(plan.chunk_keys[0])
    r.delete(project.bloom)
    _, plan = call(conn, project, [], FINGERPRINTS)
    assert not r.hexists(project.bloom, "block") and plan.geometry.planned_kind == "fingerprint"
    assert (
        call(conn, project, urls(5), FINGERPRINTS, kind="fingerprint:16")[0].code
        == scripts.bloom_add.codes.LAYERS_CHANGED
    )
    assert not r.exists(project.todo)


@BOTH
def test_a_fingerprint_size_out_of_range_fails_before_any_write(conn, project, r, fingerprints):
    import pytest

    from tracker_core.scripts import ScriptError

    _, plan = call(conn, project, [], fingerprints)
    for size in (0, 9):
        with pytest.raises(ScriptError, match="1 to 8 bytes"):
            call(conn, project, urls(3), fingerprints, ks=[size])
    assert not r.exists(project.todo) and not r.exists(plan.chunk_keys[0])


# -- a damaged counter must fail the script before its first write (Redis keeps a failed script's
# writes: names marked seen but never queued could not come back) --------------------------------


def damage_stats_type(r, k):
    r.delete(k.stats)
    r.rpush(k.stats, "not a hash")


def damage_layer_count(r, k):
    r.hset(k.bloom, "n:0", "not a number")


def damage_item_count(r, k):
    r.hset(k.bloom, "items", "1.5")


def damage_new_counter(r, k):
    r.hset(k.stats, "items_added", "many")


def damage_seen_counter(r, k):
    r.hset(k.stats, "items_duplicate", "x")


@pytest.mark.parametrize(
    "shape",
    [WIDE, FINGERPRINTS, BLOCKED, dict(WIDE, kind="layered")],
    ids=["wide", "pairs", "blocked", "layered"],
)
@pytest.mark.parametrize(
    "damage",
    [damage_stats_type, damage_layer_count, damage_item_count, damage_new_counter, damage_seen_counter],
)
def test_a_damaged_counter_fails_before_any_write(conn, project, r, shape, damage):
    from tracker_core.scripts import ScriptError

    batch = urls(30) + urls(30)[:3]  # new names and seen ones: both counters are written
    _, plan = call(conn, project, [], shape)
    damage(r, project)
    with pytest.raises(ScriptError):
        call(conn, project, batch, shape)
    assert not r.exists(project.todo)
    assert not any(r.exists(key) for key in plan.chunk_keys)


@BOTH
def test_a_damaged_shard_count_fails_before_any_write(conn, project, r, fingerprints):
    from tracker_core.scripts import ScriptError

    _, plan = call(conn, project, [], fingerprints)
    r.hset(project.backfeed_shards, "shard-a", "lots")
    with pytest.raises(ScriptError):
        call(conn, project, urls(10), fingerprints, shard="shard-a")
    assert not r.exists(project.todo) and not r.exists(plan.chunk_keys[0])
    assert call(conn, project, urls(10), fingerprints, shard="shard-b")[0] == (
        scripts.bloom_add.codes.OK,
        10,
        0,
    )
    assert r.hget(project.backfeed_shards, "shard-b") == "10"


def _with_last_chunk_index(hashed: list, geometry: dict, ks: list, index: int) -> list:
    """HASHED (one layer) with its last item's chunk given as KEYS index INDEX."""
    hashed = list(hashed)
    if geometry.get("block"):
        hashed[-1] = bytes([hashed[-1][0]]) + index.to_bytes(3, "big")
    elif geometry.get("kind") == "fingerprint":
        hashed[-6] = index
    else:
        hashed[-1 - ks[0]] = index
    return hashed


@pytest.mark.parametrize("geometry", [WIDE, FINGERPRINTS, BLOCKED], ids=["bits", "pairs", "blocked"])
@pytest.mark.parametrize("where", ["past the chunks", "a fixed key"])
def test_an_item_whose_chunk_is_not_a_chunk_fails_before_any_write(conn, project, r, geometry, where):
    """Items are written one by one (fingerprints) or a chunk at a time (bits): a chunk index
    that names no chunk, on the batch's last item, used to fail the script after the items
    before it were marked seen and never queued."""
    from tracker_core.scripts import ScriptError

    _, plan = call(conn, project, [], dict(geometry, chunk_bits=4096))
    wired = [e.encode() for e in urls(50)]
    hashed = plan.args(wired, wired)
    stashes = 1 if geometry.get("kind") == "fingerprint" else 0
    index = 10 + len(plan.chunk_keys) - stashes if where == "past the chunks" else 4  # the bloom hash
    with pytest.raises(ScriptError, match="chunk"):
        call(
            conn,
            project,
            urls(50),
            dict(geometry, chunk_bits=4096),
            hashed=_with_last_chunk_index(hashed, geometry, plan.ks, index),
        )
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"
    assert not any(r.exists(key) for key in plan.chunk_keys)
