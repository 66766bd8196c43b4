"""The settings' blocked_index_size: set_blocks-4.lua keeps it equal to the block index's size, in
the same step, and claim-21.lua skips its two block lookups only when it reads '0'. A project
whose settings lack it (made before it) is still checked, so no block can go unenforced."""

import pytest

from support.projects import new_project
from tracker_core import scripts
from tracker_core.admin import limit_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P, OTHER = "flagged", "flagged2"
K = ProjectKeys(P)
ITEMS = [f"https://example.com/a b/{n}?q=%20&r=#frag/" + "x" * 300 for n in range(20)]
BLOCKED = [("name:mallory", "mallory", "192.0.2.1"), ("ip:10.0.0.0/8", "alice", "10.20.30.40")]


@pytest.fixture
def project(admin):
    return new_project(admin, P, ITEMS)


def code(engine, who, ip):
    return engine.claim(P, who, ip, 1)[0]


def size_agrees(r, k=K):
    """The flag holds the index's size exactly."""
    return r.hget(k.settings, "blocked_index_size") == str(r.zcard(k.blocked_index))


def test_a_new_project_records_an_empty_index(project, r):
    assert r.hget(K.settings, "blocked_index_size") == "0"


@pytest.mark.parametrize("entry,who,ip", BLOCKED)
def test_the_size_follows_every_way_blocks_change(project, r, admin, entry, who, ip):
    limit_verbs.block(admin, entry, P)
    assert size_agrees(r) and r.hget(K.settings, "blocked_index_size") != "0"
    limit_verbs.block(admin, entry, P, remove=True)
    assert r.hget(K.settings, "blocked_index_size") == "0"
    limit_verbs.block(admin, entry)  # global: copied into every project
    project_verbs.create(admin, OTHER)  # a project made while a global block holds
    for k in (K, ProjectKeys(OTHER)):
        assert size_agrees(r, k) and r.hget(k.settings, "blocked_index_size") != "0"
    limit_verbs.block(admin, entry, remove=True)
    for k in (K, ProjectKeys(OTHER)):
        assert r.hget(k.settings, "blocked_index_size") == "0"
    r.hdel(K.settings, "blocked_index_size")
    limit_verbs.reindex_blocks(admin)
    assert r.hget(K.settings, "blocked_index_size") == "0"


@pytest.mark.parametrize("entry,who,ip", BLOCKED)
def test_blocks_are_enforced_with_the_size_and_without_it(project, engine, r, admin, entry, who, ip):
    limit_verbs.block(admin, entry, P)
    assert code(engine, who, ip) == scripts.claim.codes.BLOCKED
    # Settings from before the size: absent means the index is read.
    r.hdel(K.settings, "blocked_index_size")
    assert code(engine, who, ip) == scripts.claim.codes.BLOCKED
    assert r.hget(K.stats, "requests_blocked") == "2" and r.scard(K.todo) == len(ITEMS)
    limit_verbs.block(admin, entry, P, remove=True)  # lifting the last block lets the claim skip
    assert r.hget(K.settings, "blocked_index_size") == "0"
    assert code(engine, who, ip) == scripts.claim.codes.OK


def test_the_claim_skips_the_index_only_on_an_explicit_zero(project, engine, r, admin):
    limit_verbs.block(admin, "name:mallory", P)
    # A state no writer makes (the index and its size change in one script): it shows that the
    # claim trusts '0', and that any other value reads the index.
    for stored, expected in (
        ("0", scripts.claim.codes.OK),
        ("", scripts.claim.codes.BLOCKED),
        ("x", scripts.claim.codes.BLOCKED),
    ):
        r.hset(K.settings, "blocked_index_size", stored)
        assert code(engine, "mallory", "192.0.2.1") == expected


def test_maintain_records_the_size_of_projects_made_before_it(project, engine, r, admin):
    limit_verbs.block(admin, "name:mallory", P)
    project_verbs.create(admin, OTHER)
    for k in (K, ProjectKeys(OTHER)):
        r.hdel(k.settings, "blocked_index_size")  # as a tracker before the size left them
    assert limit_verbs.reindex_blocks_if_missing(admin) == {"projects": 0}  # no index was missing
    assert size_agrees(r) and r.hget(K.settings, "blocked_index_size") != "0"
    assert r.hget(ProjectKeys(OTHER).settings, "blocked_index_size") == "0"
    assert (
        r.smembers(K.blocked) == {"name:mallory"}
        and code(engine, "mallory", "192.0.2.1") == scripts.claim.codes.BLOCKED
    )
