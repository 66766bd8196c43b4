"""`tracker project set` and offload settings that could strand items: a failure (exit 1, one line,
no usage banner) that changes no stored setting; several settings in one command are checked
and stored as one whole; `tracker project show` and `tracker status` flag a project an older
tracker stored with such settings."""

from __future__ import annotations

import json

import pytest

from support.offload_settings import CASES
from tracker_core.keyspace import ProjectKeys

P = "cli-offload"
K = ProjectKeys(P)


@pytest.fixture
def cli(cli):
    assert cli("project", "create", P).exit_code == 0
    return cli


@pytest.mark.parametrize("stored,change,refused", CASES)
def test_project_set_refuses_settings_that_strand_items(cli, r, stored, change, refused):
    if stored:
        r.hset(K.settings, mapping=stored)
    before = r.hgetall(K.settings)
    res = cli("project", "set", P, *(f"{name}={value}" for name, value in change.items()))
    if refused:
        assert res.exit_code == 1 and "Usage:" not in res.output, res.output
        assert res.output.strip().count("\n") == 0 and refused in res.output, res.output
        assert r.hgetall(K.settings) == before
    else:
        assert res.exit_code == 0, res.output
        assert {name: r.hget(K.settings, name) for name in change} == change


def test_watermarks_set_one_at_a_time_or_all_at_once(cli, r):
    """One at a time, high first is refused (the state between would strand items) and says to
    set the rest in the same change; one command with all three is stored as one change."""
    res = cli("project", "set", P, "offload_high=2000")
    assert res.exit_code == 1 and "in the same change" in res.output
    res = cli("project", "set", P, "offload_high=2000", "offload_low=1000", "offload_segment_items=1000")
    assert res.exit_code == 0, res.output
    assert (r.hget(K.settings, "offload_high"), r.hget(K.settings, "settings_age")) == ("2000", "2")


def test_show_and_status_flag_settings_an_older_tracker_stored(cli, r):
    def shown():
        return (
            json.loads(cli("project", "show", P, "--json").output)["offload_warning"],
            json.loads(cli("status", P, "--json").output)["offload_warning"],
        )

    assert shown() == (None, None)
    r.hset(K.settings, "offload_high", "2000")
    show, status = shown()
    assert show == status and show.startswith("offload_high=2000 without offload_low")
    text = cli("project", "show", P).output
    assert "offload_warning" in text and "without offload_low" in text
