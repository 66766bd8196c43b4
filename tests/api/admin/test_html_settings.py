"""marker_html (a project admin's) and the front page's banner (a global admin's) are kept to
safe_html's allowlist when set, through the admin API, the CLI and the verbs, and again when
served, for a value stored before that rule (written here straight into Redis)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from support.projects import new_project
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.admin import hq_verbs
from tracker_core.admin.errors import AdminError
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import safe_html

P = "mapped"
K = ProjectKeys(P)
HOSTILE = (
    '<b>here</b><script>document.title="ran"</script><img src=x onerror=alert(1)>'
    '<svg onload=alert(1)></svg><a href="javascript:alert(1)">click</a>'
    '<a href="https://example.org/">site</a><iframe src="https://evil.example/"></iframe>'
)
KEPT = (
    '<b>here</b><a rel="noopener noreferrer">click</a>'
    '<a href="https://example.org/" rel="noopener noreferrer">site</a>'
)


@pytest.fixture
def project(admin):
    return new_project(admin, P)


def post(web, path, token, body):
    return web.simulate_post(
        path,
        body=orjson.dumps(body),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )


def test_the_expected_cleaning():
    assert safe_html.clean(HOSTILE) == KEPT


@pytest.mark.usefixtures("project")
def test_marker_html_set_by_a_project_token_is_stored_clean(web, r):
    token = tokens.create(r, P)[0]
    assert post(web, f"/api/admin/projects/{P}/settings", token, {"marker_html": HOSTILE}).status_code == 200
    assert r.hget(K.settings, "marker_html") == KEPT
    (entry,) = web.simulate_get("/projects.json").json["projects"]
    assert entry["marker_html"] == KEPT


@pytest.mark.usefixtures("project")
def test_marker_html_set_through_the_cli_is_stored_clean(redis_url, r):
    res = CliRunner().invoke(main, ["--redis-url", redis_url, "project", "set", P, f"marker_html={HOSTILE}"])
    assert res.exit_code == 0, res.output
    assert r.hget(K.settings, "marker_html") == KEPT


@pytest.mark.usefixtures("project")
def test_marker_html_too_long_once_sanitised_is_refused_and_changes_nothing(web, r):
    token = tokens.create(r, P)[0]
    before = r.hgetall(K.settings)
    res = post(web, f"/api/admin/projects/{P}/settings", token, {"marker_html": "<" * 1500})
    assert res.status_code == 400
    assert res.json == {"error": "marker_html: must be at most 2000 characters once sanitised (it has 6000)"}
    assert r.hgetall(K.settings) == before
    assert r.hget(K.stats, "admin_bad_request") == "1"


@pytest.mark.usefixtures("project")
def test_a_marker_stored_before_the_rule_is_served_clean(web, r):
    r.hset(K.settings, "marker_html", HOSTILE)  # as an older tracker stored it
    (entry,) = web.simulate_get("/projects.json").json["projects"]
    assert entry["marker_html"] == KEPT
    warrior = orjson.dumps({"warrior": {"warrior_id": "0" * 32}})
    (entry,) = web.simulate_post("/api/update.json", body=warrior).json["projects"]
    assert entry["marker_html"] == KEPT


def test_the_banner_set_through_the_api_the_cli_and_the_verb_is_stored_clean(web, r, admin, redis_url):
    token = tokens.create(r, "*")[0]
    res = post(web, "/api/admin/hq", token, {"tracker_banner_html": HOSTILE})
    assert res.status_code == 200 and res.json == {"hq": {"tracker_banner_html": KEPT}}
    assert r.hget(keyspace.HQ, "tracker_banner_html") == KEPT
    r.hdel(keyspace.HQ, "tracker_banner_html")
    res = CliRunner().invoke(
        main, ["--redis-url", redis_url, "admin", "hq", f"tracker_banner_html={HOSTILE}"]
    )
    assert res.exit_code == 0, res.output
    assert r.hget(keyspace.HQ, "tracker_banner_html") == KEPT
    r.hdel(keyspace.HQ, "tracker_banner_html")
    assert hq_verbs.set_fields(admin, {"tracker_banner_html": HOSTILE}) == {
        "hq": {"tracker_banner_html": KEPT}
    }
    assert r.hget(keyspace.HQ, "tracker_banner_html") == KEPT
    # The audit log keeps what was stored, never the script.
    audit = str(r.xrange(keyspace.AUDIT))
    assert "hq.set" in audit and "<script" not in audit


def test_a_banner_too_long_once_sanitised_is_refused_and_changes_nothing(web, r, admin):
    hq_verbs.set_fields(admin, {"tracker_banner_html": "<b>kept</b>"})
    limit = hq_verbs.HQ_MAX_CHARS["tracker_banner_html"]
    with pytest.raises(AdminError, match="once sanitised"):
        hq_verbs.set_fields(admin, {"tracker_banner_html": "&" * (limit // 2 + 1)})
    with pytest.raises(AdminError, match=f"at most {2 * limit} characters"):
        hq_verbs.set_fields(admin, {"tracker_banner_html": "x" * (2 * limit + 1)})
    assert r.hget(keyspace.HQ, "tracker_banner_html") == "<b>kept</b>"


def test_a_banner_stored_before_the_rule_is_served_clean(engine, r):
    r.hset(keyspace.HQ, "tracker_banner_html", HOSTILE)
    page = testing.TestClient(create_app(engine)).simulate_get("/").text
    assert f'<div class="banner">{KEPT}</div>' in page
    for word in ("<script", "<img", "<svg", "<iframe", "javascript:", "onerror", "onload"):
        assert word not in page
