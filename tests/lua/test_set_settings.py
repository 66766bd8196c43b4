"""set_settings-1.lua: settings change and the age moves in one step; '' deletes a field."""

from tracker_core import scripts
from tracker_core.keyspace import SETTINGS_CHANNEL, ProjectKeys


def test_set_settings_bumps_the_age(conn, project, r):
    age = scripts.set_settings(
        conn, project, channel=SETTINGS_CHANNEL, values={"title": "New", "description": ""}
    )
    assert age == 2
    assert r.hget(project.settings, "title") == "New" and not r.hexists(project.settings, "description")
    assert r.hget(project.settings, "settings_age") == "2"


def test_set_settings_refusals_change_nothing(conn, project, r, k):
    unknown = scripts.set_settings(conn, ProjectKeys("nowhere"), channel=SETTINGS_CHANNEL, values={})
    assert unknown == scripts.set_settings.codes.UNKNOWN_PROJECT
    r.hset(project.settings, "settings_age", "x")
    assert scripts.set_settings(conn, project, channel=SETTINGS_CHANNEL, values={"title": "T"}) == (
        scripts.set_settings.codes.DAMAGED
    )
    assert r.hget(project.settings, "title") == ""


def test_set_settings_writes_only_while_the_expected_fields_hold(conn, project, r):
    """The caller checked offload settings as a whole against what it read: a field changed since
    (or removed) refuses the write, nothing changed and the age kept; unchanged ones let it."""
    r.hset(project.settings, mapping={"offload_low": "1000"})
    before = r.hgetall(project.settings)
    for expected in ({"offload_low": "999"}, {"offload_low": ""}, {"offload_high": "5"}):
        reply = scripts.set_settings(
            conn, project, channel=SETTINGS_CHANNEL, values={"offload_high": "2000"}, expected=expected
        )
        assert reply == scripts.set_settings.codes.CHANGED
        assert r.hgetall(project.settings) == before
    age = scripts.set_settings(
        conn,
        project,
        channel=SETTINGS_CHANNEL,
        values={"offload_high": "2000"},
        expected={"offload_low": "1000", "no_such_field": ""},
    )
    assert age == 2 and r.hget(project.settings, "offload_high") == "2000"


def test_set_settings_refuses_a_count_of_expected_pairs_that_does_not_fit(project, r):
    before = r.hgetall(project.settings)
    for argv in (("x",), ("-1",), ("1.5",), ("2", "a", "b"), ("1", "a"), ("0", "title")):
        assert scripts.set_settings.send(r, (project.settings,), (project.project, "ch", *argv)) == (
            scripts.set_settings.codes.DAMAGED
        )
    assert r.hgetall(project.settings) == before
