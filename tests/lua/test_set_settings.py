"""set_settings-1.lua: settings change and the age moves in one step; '' deletes a field."""

from tracker_core import script_calls
from tracker_core.keys import SETTINGS_CHANNEL, ProjectKeys
from tracker_core.reply_codes import SetSettings


def test_set_settings_bumps_the_age(conn, project, r):
    age = script_calls.set_settings(
        conn, project, channel=SETTINGS_CHANNEL, values={"title": "New", "description": ""}
    )
    assert age == 2
    assert r.hget(project.settings, "title") == "New" and not r.hexists(project.settings, "description")
    assert r.hget(project.settings, "settings_age") == "2"


def test_set_settings_refusals_change_nothing(conn, project, r, k):
    unknown = script_calls.set_settings(conn, ProjectKeys("nowhere"), channel=SETTINGS_CHANNEL, values={})
    assert unknown == SetSettings.UNKNOWN_PROJECT
    r.hset(project.settings, "settings_age", "x")
    assert script_calls.set_settings(conn, project, channel=SETTINGS_CHANNEL, values={"title": "T"}) == (
        SetSettings.DAMAGED
    )
    assert r.hget(project.settings, "title") == ""
