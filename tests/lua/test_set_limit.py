"""set_limit-4.lua: one limit set or removed with the settings age, within the bound."""

import json

from tracker_core import scripts
from tracker_core.keyspace import SETTINGS_CHANNEL

RECORD = json.dumps({"pattern": "domain:example.com", "rate": "10/s", "rate_per_s": 10.0})


def set_limit(conn, k, op, name, record="", max_limits=5):
    return scripts.set_limit(
        conn, k, channel=SETTINGS_CHANNEL, op=op, name=name, record=record, max_limits=max_limits
    )


def test_set_and_remove_a_limit(conn, project, r):
    assert set_limit(conn, project, "set", "ex", RECORD) == 2
    assert json.loads(r.hget(project.limits, "ex"))["pattern"] == "domain:example.com"
    assert set_limit(conn, project, "remove", "ex") == 3
    assert not r.exists(project.limits)


def test_set_limit_refusals(conn, project, r):
    assert set_limit(conn, project, "remove", "none") == scripts.set_limit.codes.UNKNOWN_LIMIT
    assert set_limit(conn, project, "set", "one", RECORD, max_limits=1) == 2
    assert set_limit(conn, project, "set", "two", RECORD, max_limits=1) == scripts.set_limit.codes.TOO_MANY
    assert r.hkeys(project.limits) == ["one"] and r.hget(project.settings, "settings_age") == "2"
