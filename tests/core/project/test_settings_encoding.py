"""The settings hash is kept a hashtable (script_constants.SETTINGS_PAD_FIELD): every claim and
done reads it with HMGET, which searches a listpack field by field. The field never shows as a
setting, and `tracker maintain` gives it to projects an older tracker created. The stats hash
likewise (STATS_PAD_FIELD: a long name, value 0)."""

import pytest

from tracker_core.admin import item_verbs, project_verbs, upgrades
from tracker_core.admin.context import AdminContext
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import settings_schema
from tracker_core.scripts.constants import SETTINGS_PAD, SETTINGS_PAD_FIELD, STATS_PAD_FIELD

P = "padded"
K = ProjectKeys(P)


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)


def old_project(r, name):
    """A project as an older tracker created it: its settings a hash of short values."""
    r.sadd("tracker:projects", name)
    r.hset(ProjectKeys(name).settings, mapping={"settings_age": "3", "created_ms": "1", "max_multi": "7"})


def test_both_pads_are_longer_than_a_listpack_value_may_be(r):
    most = int(r.config_get("hash-max-listpack-value")["hash-max-listpack-value"])
    assert len(SETTINGS_PAD) > most and len(STATS_PAD_FIELD) > most


def test_a_new_project_has_hashtable_settings_that_survive_a_restart(ctx, r, engine):
    project_verbs.create(ctx, P, {"max_multi": "5"})
    assert r.object("encoding", K.settings) == "hashtable"
    assert r.hget(K.settings, SETTINGS_PAD_FIELD) == SETTINGS_PAD
    # DUMP and RESTORE: the RDB encoding a restart (or an AOF rewrite's preamble) loads.
    r.restore(K.settings, 0, r.dump(K.settings), replace=True)
    assert r.object("encoding", K.settings) == "hashtable"
    # The field is no setting: neither shown nor cached.
    assert SETTINGS_PAD_FIELD not in project_verbs.show(ctx, P)["settings"]
    assert SETTINGS_PAD_FIELD not in engine.settings(P).values
    assert engine.settings(P).max_multi == 5


def test_a_settings_change_pads_an_old_project(ctx, r, engine):
    old_project(r, P)
    assert r.object("encoding", K.settings) == "listpack"
    project_verbs.store_settings(ctx, K, {"max_multi": "9"})
    assert r.object("encoding", K.settings) == "hashtable"
    assert r.hget(K.settings, "settings_age") == "4"
    assert engine.settings(P).max_multi == 9


def test_no_admin_may_set_or_delete_the_pad(ctx, r):
    project_verbs.create(ctx, P)
    for value in ("x", ""):
        with pytest.raises(ValueError, match="unknown setting"):
            settings_schema.validate(SETTINGS_PAD_FIELD, value)
    assert r.hget(K.settings, SETTINGS_PAD_FIELD) == SETTINGS_PAD


def test_maintain_pads_each_old_project_once_and_creates_no_deleted_one(ctx, r):
    old_project(r, "old1")
    old_project(r, "old2")
    r.hset(ProjectKeys("old2").stats, "items_done", 5)  # counted before: the pad joins them
    project_verbs.create(ctx, "new")
    r.sadd("tracker:projects", "gone")  # listed, its settings deleted: the script writes nothing
    assert upgrades.pad_hashes(ctx) == {"padded": 2}
    for name in ("old1", "old2", "new"):
        assert r.object("encoding", ProjectKeys(name).settings) == "hashtable"
        assert r.object("encoding", ProjectKeys(name).stats) == "hashtable"
    assert r.hget(ProjectKeys("old1").settings, "settings_age") == "3"  # no setting changed
    assert r.hget(ProjectKeys("old2").stats, "items_done") == "5"
    assert not r.exists(ProjectKeys("gone").settings) and not r.exists(ProjectKeys("gone").stats)
    assert upgrades.pad_hashes(ctx) == {"padded": 0}


def test_the_stats_pad_is_no_counter_and_survives_a_restart(ctx, r, engine):
    project_verbs.create(ctx, P)
    assert r.hget(K.stats, STATS_PAD_FIELD) == "0"
    assert r.object("encoding", K.stats) == "hashtable"
    r.restore(K.stats, 0, r.dump(K.stats), replace=True)
    assert r.object("encoding", K.stats) == "hashtable"
    item_verbs.add(ctx, P, ["https://example.com/a b?c=%20#d"])
    status, names = engine.claim(P, "alice", "10.0.0.1", 1)
    assert engine.done(P, "alice", "1", names, ["data", 10], "{}").new == 1
    counters = engine.counts(P)["counters"]
    assert STATS_PAD_FIELD not in counters and counters["items_done"] == 1
    assert r.object("encoding", K.stats) == "hashtable"
