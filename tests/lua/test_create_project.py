"""create_project-3.lua: settings with defaults and the global blocks' copy, once."""

import pytest

from tracker_core import scripts
from tracker_core.scripts.constants import SETTINGS_PAD, SETTINGS_PAD_FIELD, STATS_PAD_FIELD


def test_create_project_once_with_its_blocks(conn, k, r, now_ms):
    created = scripts.create_project(conn, k, now_ms=now_ms, settings={"title": "T"}, blocked=["name:bad"])
    assert created == scripts.create_project.codes.CREATED
    assert r.hgetall(k.settings) == {
        "settings_age": "1",
        "created_ms": str(now_ms),
        "title": "T",
        SETTINGS_PAD_FIELD: SETTINGS_PAD,
    }
    assert r.object("encoding", k.settings) == "hashtable"
    assert r.hgetall(k.stats) == {STATS_PAD_FIELD: "0"} and r.object("encoding", k.stats) == "hashtable"
    assert r.smembers(k.blocked) == {"name:bad"}
    again = scripts.create_project(conn, k, now_ms=now_ms + 1, settings={"title": "U"})
    assert again == scripts.create_project.codes.EXISTS and r.hget(k.settings, "title") == "T"


@pytest.mark.parametrize("broken", ["stats", "blocked"])
def test_a_key_of_the_wrong_type_fails_the_creation_before_any_write(conn, k, r, now_ms, broken):
    r.set(getattr(k, broken), "not the right type")
    with pytest.raises(Exception, match="WRONGTYPE"):
        scripts.create_project(conn, k, now_ms=now_ms, settings={"title": "T"}, blocked=["name:bad"])
    assert not r.exists(k.settings)  # no half-made project: the settings make it exist
