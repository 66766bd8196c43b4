"""Every filter kind: the read-only membership test (bloom.seen_by, contains_many) answers what
bloom_add decides, name by name, through growth and the stash; odd names hash alike in both twins."""

import random

import pytest

from support import twins
from tracker_core import bloom
from tracker_core.admin import projects
from tracker_core.keys import ProjectKeys
from tracker_core.rawredis import RawRedis

compiled, pure = twins.pair("bloom")

P = "kinds"


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
    monkeypatch.setattr(bloom, "script_args", module.script_args)
    monkeypatch.setattr(bloom, "fingerprint_args", module.fingerprint_args)
    return request.param


@pytest.mark.parametrize("kind", bloom.KINDS)
@pytest.mark.parametrize("capacity", [5, 60])
def test_membership_agrees_with_bloom_add_name_by_name_through_growth(
    admin, redis_url, kind, capacity, hashing
):
    """Capacity 5 makes one-bucket fingerprint layers and several layers; a fingerprint filter's
    first batches of 20 overfill their layer (a layer grows only after a batch), so most of their
    names are stashed.
    Then each name is asked before it is added (seen_by and contains_many must predict the
    script's answer), and every name added is found afterwards."""
    projects.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    assert isinstance(bloom.configure(conn, k, bloom.Geometry(capacity=capacity, kind=kind)), bloom.Geometry)
    filt = bloom.BloomFilter(conn, k)
    rng = random.Random(f"{kind}{capacity}")
    names = odd_names(rng, 150)
    added: list[bytes] = []
    # Overfilling a layer is safe only for fingerprints (the stash is exact): see
    # test_a_layer_overfilled_by_one_batch_forgets_nothing.
    first = 40 if kind == bloom.FINGERPRINT else 0
    for start in range(0, first, 20):
        batch = names[start : start + 20]
        assert filt.add(batch).new == 20
        added += batch
    for name in names[first:] + rng.sample(names, 40):
        predicted = bloom.seen_by(admin.conn, k, [name])
        assert filt.contains_many([name]) == predicted
        result = filt.add([name])
        assert result.status == bloom.OK
        assert (result.seen == 1) == predicted[0], name
        if result.new:
            added.append(name)
    assert int(admin.conn.hget(k.bloom, "layers")) > 1
    assert all(bloom.seen_by(admin.conn, k, added)) and all(filt.contains_many(added))
    assert admin.conn.scard(k.backfeed) == len(added)
    if kind == bloom.FINGERPRINT and capacity == 5:
        assert admin.conn.scard(k.bloom_stash(0)) > 0 and admin.conn.scard(k.bloom_stash(1)) > 0


@pytest.mark.parametrize("kind", bloom.KINDS)
def test_a_name_repeated_in_one_batch_is_queued_once_in_every_kind(admin, redis_url, kind, hashing):
    projects.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    bloom.configure(conn, k, bloom.Geometry(capacity=5, kind=kind))
    names = odd_names(random.Random(kind), 12)
    batch = names + names[::-1] + names[:3]
    result = bloom.BloomFilter(conn, k).add(batch)
    assert result.status == bloom.OK and result.new + result.seen == len(batch)
    assert result.new == admin.conn.scard(k.backfeed) <= len(names)
    assert result.new >= len(names) - 1  # a false positive at 1e-6 is not expected here
    assert all(bloom.seen_by(admin.conn, k, names))


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
    plain = [str(key) if isinstance(key, str) else bytes(key) for key in keys]
    assert pure.script_args(entries, keys, layers) == pure.script_args(entries, plain, layers)


@pytest.mark.xfail(
    strict=True,
    reason="a layer grows only after a batch: a bit layer whose capacity is far under one batch "
    "saturates and then reports every new name seen (left open, see the issue 16 review)",
)
@pytest.mark.parametrize("kind", [bloom.LAYERED, bloom.WIDE])
def test_a_layer_overfilled_by_one_batch_forgets_nothing(admin, redis_url, kind):
    projects.create(admin, P)
    k = ProjectKeys(P)
    conn = RawRedis(redis_url)
    bloom.configure(conn, k, bloom.Geometry(capacity=5, kind=kind))
    filt = bloom.BloomFilter(conn, k)
    names = [f"https://example.com/over/{i}?q=%20#f".encode() for i in range(bloom.BATCH)]
    assert filt.add(names).new >= bloom.BATCH - 1
    fresh = [f"https://example.com/fresh/{i}".encode() for i in range(100)]
    assert filt.add(fresh).new >= 99
