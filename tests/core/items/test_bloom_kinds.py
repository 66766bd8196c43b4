"""Every filter kind: the read-only membership test (bloom_membership.seen_by, contains_many) answers what
bloom_add decides, name by name, through growth and the stash; odd names hash alike in both twins."""

import random

import pytest

from support import twins
from tracker_core.admin import project_verbs
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import bloom, bloom_geometry, bloom_membership, bloom_plan
from tracker_core.keyspace import ProjectKeys

compiled, pure = twins.pair("bloom")

P = "kinds"
# Every kind, and the fingerprint filters made before blocks (independent bucket pairs), which
# must keep answering as they did.
SHAPES = (*bloom.KINDS, "fingerprint-pairs")


def shaped(kind: str, **geometry) -> bloom.Geometry:
    if kind == "fingerprint-pairs":
        return bloom.Geometry(kind=bloom.FINGERPRINT, block=0, **geometry)
    return bloom.Geometry(kind=kind, **geometry)


def odd_names(rng: random.Random, n: int) -> list[bytes]:
    """URLs, and what an anonymous post may send: non-UTF-8 bytes, a lone NUL, 4 KB names,
    names ending in the bytes a stash member is built from."""
    names = []
    for i in range(n):
        shape = i % 6
        if shape == 0:
            names.append(f"https://example.com/a b/{i}?q=%20&r={rng.random()}#frag".encode())
        elif shape == 1:
            names.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))))
        elif shape == 2:
            names.append(b"\xff\xfe/%d" % i)
        elif shape == 3:
            names.append(b"https://example.com/long/" + b"x" * 4096 + b"/%d" % i)
        elif shape == 4:
            names.append(b"\x00" * (i % 5 + 1) + b"%d" % i)
        else:
            names.append(b"%d %d \x01" % (i, i))
    return names


@pytest.fixture(params=["compiled", "pure"])
def hashing(request, monkeypatch):
    module = compiled if request.param == "compiled" else pure
    monkeypatch.setattr(bloom_plan, "script_args", module.script_args)
    monkeypatch.setattr(bloom_plan, "fingerprint_args", module.fingerprint_args)
    monkeypatch.setattr(bloom_plan, "block_args", module.block_args)
    return request.param


def crowded(k, geometry: bloom.Geometry, layer: int, n: int, tag: str) -> list[bytes]:
    """N URLs with the same two buckets in LAYER of a fingerprint filter (what a poster who knows
    the hash, salt included, can send): with independent pairs, one bucket twice (8 fill it); in
    a blocked filter, its first two buckets (16 fill them); the others are stashed."""
    plan = bloom.Plan(k, bloom.Geometry(**{**geometry.__dict__, "layers": layer + 1}))
    bucket = plan.layers[layer].slot_bytes * bloom_geometry.BUCKET_SLOTS
    found, i = [], 0
    while len(found) < n:
        name = f"https://example.com/{tag}/{i}?q=%20#f".encode()
        args = plan.hashed([b""], [name], [plan.hash_plan[layer]])
        if args[1:3] == [0, 2 * bucket - 1] if plan.blocked else args[2] == args[4] == 0:
            found.append(name)
        i += 1
    return found


@pytest.mark.parametrize("kind", SHAPES)
@pytest.mark.parametrize("capacity", [5, 60])
def test_membership_agrees_with_bloom_add_name_by_name_through_growth(
    admin, redis_url, kind, capacity, hashing
):
    """Capacity 5 and 60 make several layers over 200 names; a fingerprint filter of 60 also
    gets names crowded into one bucket per layer, so each layer stashes some. Each name is asked
    before it is added (seen_by and contains_many must predict the script's answer), and every
    name added is found afterwards."""
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    geometry = bloom.configure(conn, k, shaped(kind, capacity=capacity))
    assert isinstance(geometry, bloom.Geometry)
    assert geometry.block == (bloom_geometry.BLOCK_BUCKETS if kind == bloom.FINGERPRINT else 0)
    filt = bloom.BloomFilter(conn, k)
    rng = random.Random(f"{kind}{capacity}")
    names = odd_names(rng, 150)
    stashing = kind.startswith(bloom.FINGERPRINT) and capacity == 60
    if stashing:
        crowd = 20 if geometry.block else 12
        names = crowded(k, geometry, 0, crowd, "zero") + names + crowded(k, geometry, 1, crowd, "one")
    added: list[bytes] = []
    for name in names + rng.sample(names, 40):
        predicted = bloom_membership.seen_by(admin.conn, k, [name])
        assert filt.contains_many([name]) == predicted
        result = filt.add([name])
        assert result.status == bloom.OK
        assert (result.seen == 1) == predicted[0], name
        if result.new:
            added.append(name)
    assert int(admin.conn.hget(k.bloom, "layers")) > 1 and len(added) >= 0.97 * len(names)
    assert all(bloom_membership.seen_by(admin.conn, k, added)) and all(filt.contains_many(added))
    assert admin.conn.scard(k.backfeed) == len(added)
    if stashing:
        # 4 crowded names each, and any other name both of whose buckets were full.
        assert admin.conn.scard(k.bloom_stash(0)) >= 4 and admin.conn.scard(k.bloom_stash(1)) >= 4


@pytest.mark.parametrize("kind", SHAPES)
def test_a_name_repeated_in_one_batch_is_queued_once_in_every_kind(admin, redis_url, kind, hashing):
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    bloom.configure(conn, k, shaped(kind, capacity=5))
    names = odd_names(random.Random(kind), 12)
    batch = names + names[::-1] + names[:3]
    result = bloom.BloomFilter(conn, k).add(batch)
    assert result.status == bloom.OK and result.new + result.seen == len(batch)
    assert result.new == admin.conn.scard(k.backfeed) <= len(names)
    assert result.new >= len(names) - 1  # a false positive at 1e-6 is not expected here
    assert all(bloom_membership.seen_by(admin.conn, k, names))


class Name(str):
    """A str subclass, as a caller's own name type may be."""


class Raw(bytes):
    pass


def test_twins_hash_str_and_bytes_subclasses_alike():
    keys = [Name("https://example.com/a b?q=%20#f"), Raw(b"\xff\xfe"), Name("\udcff"), Name("")]
    entries = [b"e"] * len(keys)
    layers = [(0, 20, 3, 1000, 10), (1, 10, 1, 500, 13)]
    assert compiled.script_args(entries, keys, layers) == pure.script_args(entries, keys, layers)
    slots = [(0, 3, 8, 2, 7, 10), (1, 4, 8, 1, 3, 12)]
    assert compiled.fingerprint_args(entries, keys, slots) == pure.fingerprint_args(entries, keys, slots)
    blocks = [(0, 3, 8, 2, 32, 10, 16), (1, 4, 8, 1, 4, 12, 2)]
    assert compiled.block_args(entries, keys, blocks) == pure.block_args(entries, keys, blocks)
    plain = [str(key) if isinstance(key, str) else bytes(key) for key in keys]
    assert pure.script_args(entries, keys, layers) == pure.script_args(entries, plain, layers)


@pytest.mark.parametrize("kind", SHAPES)
def test_a_batch_far_over_a_layers_capacity_fills_it_and_grows_forgetting_nothing(admin, redis_url, kind):
    """A layer grows only after a script call: a 400-name batch into a 5-item layer once saturated
    its bits, and every new name after it was called seen. Now the script sends the batch back
    cut where the layer fills (bloom_add's SPLIT), so no layer passes its capacity."""
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    bloom.configure(conn, k, shaped(kind, capacity=5))
    filt = bloom.BloomFilter(conn, k)
    names = [f"https://example.com/over/{i}?q=%20#f".encode() for i in range(bloom.BATCH)]
    # Layers of 5, 10, 20 items: double hashing over a few hundred bits is a little worse than
    # the formula, hence some slack (before the cut: 4 of 20 new, then almost none).
    assert filt.add(names).new >= bloom.BATCH * 0.98
    counts = admin.conn.hgetall(k.bloom)
    layers = int(counts["layers"])
    assert layers >= 6
    for layer in bloom.Geometry.from_redis(counts).all_layers()[:-1]:
        assert int(counts[f"n:{layer.index}"]) == layer.capacity
    fresh = [f"https://example.com/fresh/{i}".encode() for i in range(100)]
    assert filt.add(fresh).new >= 98


@pytest.mark.parametrize("kind", SHAPES)
def test_the_bound_is_checked_on_the_whole_batch_before_it_is_split(admin, redis_url, kind):
    """A batch past the bound is refused whole (nothing queued, nothing split); under the bound
    it goes in two parts, the first filling the layer, and nothing is lost."""
    project_verbs.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    bloom.configure(conn, k, shaped(kind, capacity=60))
    filt = bloom.BloomFilter(conn, k)
    old = [f"https://example.com/old/{i}?q=%20#f".encode() for i in range(50)]
    assert filt.add(old) == bloom.AddResult(bloom.OK, 50, 0)
    batch = [f"https://example.com/new/{i} x".encode() for i in range(20)]
    assert filt.add(batch, bound=65) == bloom.AddResult(bloom.FULL, 0, 0)
    assert admin.conn.scard(k.backfeed) == 50 and admin.conn.hget(k.bloom, "layers") == "1"
    assert filt.add(old[:5] + batch, bound=70) == bloom.AddResult(bloom.OK, 20, 5)
    assert admin.conn.hget(k.bloom, "n:0") == "60" and admin.conn.hget(k.bloom, "n:1") == "10"
    assert admin.conn.smembers(k.backfeed) == {name.decode() for name in old + batch}
