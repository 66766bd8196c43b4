"""bloom_configure-2.lua: a filter's geometry is fixed while it is empty, and only then."""

from tracker_core import scripts

GEOMETRY = dict(capacity=1000, fp_rate="0.001", growth=2, tightening="0.5", chunk_bits=4096)


def test_configure_stores_the_geometry_and_keeps_it(conn, project, r):
    fields = scripts.bloom_configure(conn, project, replace=False, **GEOMETRY)
    assert fields == r.hgetall(project.bloom)
    assert (fields["capacity"], fields["layers"], fields["items"]) == ("1000", "1", "0")
    kept = scripts.bloom_configure(conn, project, replace=False, **dict(GEOMETRY, capacity=5))
    assert kept["capacity"] == "1000"
    replaced = scripts.bloom_configure(conn, project, replace=True, **dict(GEOMETRY, capacity=5))
    assert replaced["capacity"] == "5"


def test_configure_refuses_a_filter_with_items_and_bad_numbers(conn, project, r, k):
    scripts.bloom_configure(conn, project, replace=False, **GEOMETRY)
    r.hset(project.bloom, "items", 3)
    assert (
        scripts.bloom_configure(conn, project, replace=True, **GEOMETRY)
        == scripts.bloom_configure.codes.NOT_EMPTY
    )
    assert scripts.bloom_configure(conn, project, replace=True, **dict(GEOMETRY, fp_rate="x")) == (
        scripts.bloom_configure.codes.NOT_A_NUMBER
    )
    assert r.hget(project.bloom, "capacity") == "1000"


def test_configure_stores_the_kind_and_refuses_an_unknown_one(conn, project, r):
    assert scripts.bloom_configure(conn, project, replace=False, **GEOMETRY)["kind"] == "layered"
    wide = scripts.bloom_configure(conn, project, replace=True, kind="wide", bits_per_item=35, **GEOMETRY)
    assert (wide["kind"], wide["bits_per_item"]) == ("wide", "35")
    for bad in (dict(kind="blocked"), dict(kind="wide", bits_per_item="x")):
        refused = scripts.bloom_configure(conn, project, replace=True, **GEOMETRY, **bad)
        assert refused == scripts.bloom_configure.codes.NOT_A_NUMBER
    assert r.hget(project.bloom, "kind") == "wide"


def test_configure_stores_a_salt_only_with_a_new_geometry_and_refuses_a_bad_one(conn, project, r):
    for bad in ("zz" * 16, "ab", "AB" * 16, "0" * 31 + "\n"):
        refused = scripts.bloom_configure(conn, project, replace=False, salt=bad, **GEOMETRY)
        assert refused == scripts.bloom_configure.codes.NOT_A_NUMBER
        assert not r.exists(project.bloom)
    good, other = "0123456789abcdef" * 2, "f" * 32
    assert scripts.bloom_configure(conn, project, replace=False, salt=good, **GEOMETRY)["salt"] == good
    kept = scripts.bloom_configure(conn, project, replace=False, salt=other, **GEOMETRY)
    assert kept["salt"] == good
    renewed = scripts.bloom_configure(conn, project, replace=True, salt=other, **GEOMETRY)
    assert renewed["salt"] == other
    unsalted = scripts.bloom_configure(conn, project, replace=True, **GEOMETRY)
    assert "salt" not in unsalted and not r.hexists(project.bloom, "salt")


def test_configure_stores_a_fingerprint_filters_block_and_refuses_a_bad_one(conn, project, r):
    """A new fingerprint filter is stored with its block; one made before blocks has none (its
    buckets are independent pairs) and no other kind takes one."""
    fingerprint = dict(GEOMETRY, kind="fingerprint")
    for bad in (dict(fingerprint, block=1), dict(fingerprint, block=257), dict(fingerprint, block="x")):
        assert (
            scripts.bloom_configure(conn, project, replace=False, **bad)
            == scripts.bloom_configure.codes.NOT_A_NUMBER
        )
    assert scripts.bloom_configure(conn, project, replace=False, **dict(GEOMETRY, block=16)) == (
        scripts.bloom_configure.codes.NOT_A_NUMBER
    )
    assert not r.exists(project.bloom)
    for block in (2, 256, 16):
        stored = scripts.bloom_configure(conn, project, replace=True, **dict(fingerprint, block=block))
        assert stored["block"] == str(block)
    pairs = scripts.bloom_configure(conn, project, replace=True, **fingerprint)
    assert "block" not in pairs and not r.hexists(project.bloom, "block")
