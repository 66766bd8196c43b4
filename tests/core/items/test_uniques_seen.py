"""The engine remembers which clients its claims counted in the daily uniques and lets the claim
script skip their PFADDs: the counts must stay exactly what counting every claim gives."""

import pytest

from support.projects import new_project
from tracker_core.admin import limit_verbs, project_verbs
from tracker_core.items.uniques_seen import UniquesSeen
from tracker_core.keyspace import ProjectKeys

P = "uniq-proj"
K = ProjectKeys(P)
DAY_MS = 86_400_000


@pytest.fixture
def project(admin):
    return new_project(admin, P, [f"https://example.com/item/{n}?q=%20a#f" for n in range(50)])


def counts(r, clock):
    day = int(clock.now * 1000) // DAY_MS
    return r.pfcount(K.uniques("downloaders", day)), r.pfcount(K.uniques("ips", day))


def test_a_returning_client_costs_no_pfadd_and_counts_once(project, engine, clock, r):
    engine.settings(P)  # what the warrior does before each claim
    for _ in range(3):
        assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert counts(r, clock) == (1, 1)
    r.config_resetstat()
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert "cmdstat_pfadd" not in r.info("commandstats")
    # A new IP for the same downloader: only the IP is added.
    assert engine.claim(P, "alice", "10.0.0.2", 1)[0] == 200
    assert r.info("commandstats")["cmdstat_pfadd"]["calls"] == 1
    assert counts(r, clock) == (1, 2)


def test_a_blocked_client_is_not_remembered(project, engine, clock, r, admin):
    engine.settings(P)
    limit_verbs.block(admin, "name:mallory", P)
    assert engine.claim(P, "mallory", "10.0.0.9", 1)[0] == 403
    limit_verbs.block(admin, "name:mallory", P, remove=True)
    assert engine.claim(P, "mallory", "10.0.0.9", 1)[0] == 200
    assert counts(r, clock) == (1, 1)


def test_a_new_day_and_a_new_life_of_the_project_count_afresh(project, engine, clock, r, admin):
    engine.settings(P)
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    clock.advance(86_400)
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert counts(r, clock) == (1, 1)
    # Deleted and created again: the engine's cached settings still carry the old created_ms,
    # which the script no longer finds stored, so the PFADDs run in the new project.
    project_verbs.delete(admin, P)
    day = int(clock.now * 1000) // DAY_MS
    r.delete(K.uniques("downloaders", day), K.uniques("ips", day))  # delete spans the real clock's days
    r.hset(K.settings, mapping={"settings_age": 1, "created_ms": 1})  # a new life, a new created_ms
    r.sadd(K.todo, "https://example.com/again?x=1")
    assert counts(r, clock) == (0, 0)
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert counts(r, clock) == (1, 1)


def test_the_memory_of_counted_members_is_bounded():
    seen = UniquesSeen(max_members=2)
    for name in ("a", "b", "c"):
        seen.record("p", "5", 0, name, "ip-" + name, 200)
    assert [seen.flags("p", "5", 0, n, "ip-" + n) for n in ("a", "b", "c")] == [
        (True, True),
        (True, True),
        (False, False),
    ]
    # Other lives, days and refusals: nothing remembered.
    assert seen.flags("p", "6", 0, "a", "ip-a") == (False, False)
    assert seen.flags("p", "5", DAY_MS, "a", "ip-a") == (False, False)
    seen.record("q", "5", 0, "a", "ip-a", 403)
    seen.record("q", "5", 0, "a", "ip-a", -1)
    assert seen.flags("q", "5", 0, "a", "ip-a") == (False, False)
