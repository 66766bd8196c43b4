"""Server-rendered admin pages: login cookie, CSRF, the daily operations, 401/403 everywhere."""
import re
import urllib.parse

import pytest
from falcon import testing

from test_api import snapshot
from tracker_api.admin_pages import csrf_for
from tracker_api.app import create_app
from tracker_core import tokens
from tracker_core.keys import ProjectKeys

P, OTHER = "proj", "other"
K = ProjectKeys(P)
ACTIONS = {"add-items": {"items": "a1\na2\n", "queue": "todo"},
           "limits": {"rate_limit": "120", "max_claims_per_downloader": "4"},
           "release": {"downloader": "alice"},
           "block": {"entry": "name:mallory"}}


@pytest.fixture
def web(engine):
    return testing.TestClient(create_app(engine))


@pytest.fixture
def tok(admin):
    admin.create_project(P)
    admin.create_project(OTHER)
    list(admin.add_items(P, [f"item{n}" for n in range(10)]))
    return {P: tokens.create(admin.r, P)[0], OTHER: tokens.create(admin.r, OTHER)[0],
            "global": tokens.create(admin.r, "*")[0]}


def form_post(web, path, fields, token=None):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if token:
        headers["Cookie"] = f"tracker_admin={token}"
    return web.simulate_post(path, body=urllib.parse.urlencode(fields), headers=headers)


def page(web, path, token=None):
    headers = {"Cookie": f"tracker_admin={token}"} if token else {}
    return web.simulate_get(path, headers=headers)


def test_login_sets_a_strict_http_only_cookie(web, tok):
    assert 'name=token' in page(web, "/admin").text
    bad = form_post(web, "/admin", {"token": "trk_000000000000_" + "x" * 43})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    res = form_post(web, "/admin", {"token": tok[P]})
    assert res.status_code == 303 and res.headers["location"].endswith("/admin")
    cookie = res.headers["set-cookie"]
    assert cookie.startswith(f"tracker_admin={tok[P]}") and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Path=/admin" in cookie
    listing = page(web, "/admin", tok[P]).text
    assert f'href="/admin/{P}"' in listing and f'href="/admin/{OTHER}"' not in listing


def test_project_page_shows_queues_and_carries_csrf(web, tok):
    res = page(web, f"/admin/{P}", tok[P])
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    assert re.search(r"<td>todo</td><td>10</td>", res.text)
    assert res.text.count(f'name=csrf value="{csrf_for(tok[P])}"') == len(ACTIONS)


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_page_action_needs_login_right_project_and_csrf(web, r, tok, action):
    fields = dict(ACTIONS[action], csrf=csrf_for(tok[P]))
    before = snapshot(r)
    assert form_post(web, f"/admin/{P}/{action}", fields).status_code == 401
    assert form_post(web, f"/admin/{P}/{action}", fields, "trk_bogus").status_code == 401
    assert form_post(web, f"/admin/{P}/{action}", dict(fields, csrf=csrf_for(tok[OTHER])),
                     tok[OTHER]).status_code == 403
    assert form_post(web, f"/admin/{P}/{action}", dict(ACTIONS[action]), tok[P]).status_code == 403
    assert form_post(web, f"/admin/{P}/{action}", dict(fields, csrf="0" * 64),
                     tok[P]).status_code == 403
    assert snapshot(r) == before
    assert page(web, f"/admin/{P}").status_code == 401
    assert page(web, f"/admin/{P}", tok[OTHER]).status_code == 403


def test_page_actions_change_state_and_are_audited(web, r, tok, engine):
    csrf = csrf_for(tok[P])
    res = form_post(web, f"/admin/{P}/add-items", dict(ACTIONS["add-items"], csrf=csrf), tok[P])
    assert res.status_code == 303 and "added+2" in res.headers["location"]
    assert r.sismember(K.todo, "a1") and r.scard(K.todo) == 12
    form_post(web, f"/admin/{P}/limits", dict(ACTIONS["limits"], csrf=csrf), tok[P])
    assert r.hget(K.settings, "rate_limit") == "120"
    assert r.hget(K.settings, "max_claims_per_downloader") == "4"
    engine.claim(P, "alice", "10.0.0.1", 3)
    form_post(web, f"/admin/{P}/release", dict(ACTIONS["release"], csrf=csrf), tok[P])
    assert r.zcard(K.out) == 0
    form_post(web, f"/admin/{P}/block", dict(ACTIONS["block"], csrf=csrf), tok[P])
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 403
    bad = form_post(web, f"/admin/{P}/limits", {"rate_limit": "lots", "csrf": csrf}, tok[P])
    assert bad.status_code == 400 and r.hget(K.settings, "rate_limit") == "120"
    assert form_post(web, f"/admin/{P}/nothing", {"csrf": csrf}, tok[P]).status_code == 404
    actions = [fields["action"] for _, fields in r.xrevrange(K.audit)]
    assert actions == ["page.block", "page.release", "page.limits", "page.add-items"]
