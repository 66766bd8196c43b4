"""Offload settings that could strand items, through the web faces: the admin API answers 400 with
the one-line reason, the admin pages' settings form shows it in the form, and neither changes a
stored setting; GET /metrics and the settings page flag a project stored with such settings."""

from __future__ import annotations

import re
import urllib.parse

import orjson
import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from support.offload_settings import CASES, SOUND
from tracker_api.admin.pages import csrf_for
from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core.access import tokens
from tracker_core.admin import project_verbs
from tracker_core.keyspace import ProjectKeys

P = "faces"
K = ProjectKeys(P)
METRICS_TOKEN = "offload-metrics-token"


@pytest.fixture
def web(engine):
    return testing.TestClient(create_app(engine, config=AppConfig(metrics_token=METRICS_TOKEN)))


@pytest.fixture
def token(admin):
    project_verbs.create(admin, P)
    return tokens.create(admin.conn, P)[0]


def stored_then(r, stored: dict) -> dict:
    """Write STORED into P's settings directly (any state a case starts from); the hash after."""
    if stored:
        r.hset(K.settings, mapping=stored)
    return r.hgetall(K.settings)


def assert_outcome(r, before: dict, change: dict, refused) -> None:
    if refused:
        assert r.hgetall(K.settings) == before
    else:
        assert {name: r.hget(K.settings, name) for name in change} == change
        assert int(r.hget(K.settings, "settings_age")) == int(before["settings_age"]) + 1


@pytest.mark.parametrize("stored,change,refused", CASES)
def test_admin_api_refuses_settings_that_strand_items(web, r, token, stored, change, refused):
    before = stored_then(r, stored)
    res = web.simulate_post(
        f"/api/admin/projects/{P}/settings",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=orjson.dumps(change),
    )
    if refused:
        assert res.status_code == 400, res.text
        assert refused in res.json["error"] and "\n" not in res.json["error"], res.json
    else:
        assert res.status_code == 200, res.text
    assert_outcome(r, before, change, refused)


@pytest.mark.parametrize("stored,change,refused", CASES)
def test_settings_form_refuses_them_inside_the_form(web, r, token, stored, change, refused):
    before = stored_then(r, stored)
    res = web.simulate_post(
        f"/admin/{P}/settings",
        body=urllib.parse.urlencode({**change, "csrf": csrf_for(token)}),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"tracker_admin={token}"},
    )
    if refused:
        assert res.status_code == 400, res.text
        form = re.search(rf'<form method=post action="/admin/{P}/settings"[^>]*>(.*?)</form>', res.text, re.S)
        errors = re.findall(r"<p class=error[^>]*>([^<]+)</p>", form.group(1))
        assert len(errors) == 1 and refused in errors[0].replace("&#39;", "'"), errors
    else:
        assert res.status_code == 303, res.text
    assert_outcome(r, before, change, refused)


def gauge(web, project: str) -> float:
    text = web.simulate_get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["tracker_offload_settings_unsafe"].type == "gauge"
    (value,) = [
        s.value for s in families["tracker_offload_settings_unsafe"].samples if s.labels["project"] == project
    ]
    return value


def test_a_project_stored_with_bad_settings_is_flagged_in_metrics_and_on_its_settings_page(
    web, r, admin, token, engine
):
    project_verbs.create(admin, "sound", SOUND)
    assert gauge(web, P) == 0 and gauge(web, "sound") == 0
    assert (
        "class=warning"
        not in web.simulate_get(f"/admin/{P}/settings", headers={"Cookie": f"tracker_admin={token}"}).text
    )
    r.hset(K.settings, "offload_high", "2000")  # as an older tracker let it through
    r.hincrby(K.settings, "settings_age", 1)
    engine._settings.clear()  # the next scrape reads the settings again (within 1 s anyway)
    assert gauge(web, P) == 1 and gauge(web, "sound") == 0
    shown = web.simulate_get(f"/admin/{P}/settings", headers={"Cookie": f"tracker_admin={token}"}).text
    (warning,) = re.findall(r"<p class=warning[^>]*>(.*?)</p>", shown, re.S)
    assert "offload_high=2000 without offload_low" in warning
    project_verbs.set_settings(admin, P, {"offload_low": "1000", "offload_segment_items": "1000"})
    engine._settings.clear()
    assert gauge(web, P) == 0
