"""pad_hashes-2.lua: the fields that keep a project's settings and stats hashtables, for a project
an older tracker created; nothing for an unknown one."""

import pytest

from tracker_core import scripts
from tracker_core.scripts.constants import SETTINGS_PAD, SETTINGS_PAD_FIELD, STATS_PAD_FIELD


def test_pad_hashes_makes_both_hashtables_keeping_what_they_hold(conn, k, r):
    r.hset(k.settings, mapping={"settings_age": "7", "title": "T"})
    r.hset(k.stats, "items_done", "3")
    assert r.object("encoding", k.settings) == r.object("encoding", k.stats) == "listpack"
    assert scripts.pad_hashes(conn, k) == scripts.pad_hashes.codes.PADDED
    assert r.hgetall(k.settings) == {"settings_age": "7", "title": "T", SETTINGS_PAD_FIELD: SETTINGS_PAD}
    assert r.hgetall(k.stats) == {"items_done": "3", STATS_PAD_FIELD: "0"}
    assert r.object("encoding", k.settings) == r.object("encoding", k.stats) == "hashtable"
    assert scripts.pad_hashes(conn, k) == scripts.pad_hashes.codes.PADDED  # again: the same
    assert r.hget(k.stats, STATS_PAD_FIELD) == "0"


def test_an_unknown_project_gets_nothing(conn, k, r):
    assert scripts.pad_hashes(conn, k) == scripts.pad_hashes.codes.UNKNOWN_PROJECT
    assert not r.exists(k.settings) and not r.exists(k.stats)


def test_a_stats_key_of_the_wrong_type_fails_before_any_write(conn, k, r):
    r.hset(k.settings, "settings_age", "1")
    r.set(k.stats, "not a hash")
    with pytest.raises(Exception, match="WRONGTYPE"):
        scripts.pad_hashes(conn, k)
    assert r.hgetall(k.settings) == {"settings_age": "1"}
