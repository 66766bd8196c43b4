"""Server-rendered admin pages: login cookie, CSRF, the daily operations, 401/403 everywhere."""

import json
import re
import urllib.parse

import pytest
from falcon import testing

from support.state import snapshot
from tracker_api.admin_pages import csrf_for
from tracker_api.app import create_app
from tracker_core import tokens
from tracker_core.admin import items, limits, projects
from tracker_core.keys import ProjectKeys

P, OTHER = "proj", "other"
K = ProjectKeys(P)
ACTIONS = {
    "add-items": {"items": "a1\na2\n", "queue": "todo"},
    "limits": {"rate_limit": "120", "max_claims_per_downloader": "4"},
    "limit-add": {"name": "users", "pattern": "type:user", "rate": "10/m"},
    "limit-remove": {"name": "users"},
    "release": {"downloader": "alice"},
    "block": {"entry": "name:mallory"},
}


@pytest.fixture
def web(engine):
    return testing.TestClient(create_app(engine))


@pytest.fixture
def tok(admin):
    projects.create(admin, P)
    projects.create(admin, OTHER)
    items.add(admin, P, [f"item{n}" for n in range(10)])
    return {
        P: tokens.create(admin.conn, P)[0],
        OTHER: tokens.create(admin.conn, OTHER)[0],
        "global": tokens.create(admin.conn, "*")[0],
    }


# What the tok fixture's own verbs record in P's audit log (newest first), under "cli".
SETUP_ACTIONS = ["items.add", "project.create"]


def form_post(web, path, fields, token=None):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if token:
        headers["Cookie"] = f"tracker_admin={token}"
    return web.simulate_post(path, body=urllib.parse.urlencode(fields), headers=headers)


def page(web, path, token=None):
    headers = {"Cookie": f"tracker_admin={token}"} if token else {}
    return web.simulate_get(path, headers=headers)


def login(web, token, fields=None, cookie=None, headers=None):
    """Post the login form as a browser does: with the nonce the form page set in its cookie."""
    form = page(web, "/admin")
    nonce = form.cookies["tracker_login"].value
    assert f'name=csrf value="{nonce}"' in form.text
    return web.simulate_post(
        "/admin",
        body=urllib.parse.urlencode(fields if fields is not None else {"token": token, "csrf": nonce}),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"tracker_login={nonce if cookie is None else cookie}",
            **(headers or {}),
        },
    )


def test_login_sets_a_strict_http_only_cookie(web, tok):
    assert "name=token" in page(web, "/admin").text
    bad = login(web, "trk_000000000000_" + "x" * 43)
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    res = login(web, tok[P])
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
    forms = res.text.count("<form method=post")
    assert forms == len(ACTIONS) - 1  # limit-remove: one form per limit, none yet
    assert res.text.count(f'name=csrf value="{csrf_for(tok[P])}"') == forms
    for action in set(ACTIONS) - {"limit-remove"}:
        assert f'action="/admin/{P}/{action}"' in res.text


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_every_page_action_needs_login_right_project_and_csrf(web, r, tok, action):
    fields = dict(ACTIONS[action], csrf=csrf_for(tok[P]))
    before = snapshot(r)
    assert form_post(web, f"/admin/{P}/{action}", fields).status_code == 401
    assert form_post(web, f"/admin/{P}/{action}", fields, "trk_bogus").status_code == 401
    assert (
        form_post(
            web, f"/admin/{P}/{action}", dict(fields, csrf=csrf_for(tok[OTHER])), tok[OTHER]
        ).status_code
        == 403
    )
    assert form_post(web, f"/admin/{P}/{action}", dict(ACTIONS[action]), tok[P]).status_code == 403
    assert form_post(web, f"/admin/{P}/{action}", dict(fields, csrf="0" * 64), tok[P]).status_code == 403
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
    # Each action is audited once, by the verb it runs, under the logged-in token's id.
    entries = [fields for _, fields in r.xrevrange(K.audit)]
    assert [f["action"] for f in entries] == [
        "block.add",
        "claims.release",
        "project.settings",
        "items.add",
        *SETUP_ACTIONS,
    ]
    assert {f["actor"] for f in entries[:4]} == {tokens.verify(r, tok[P]).token_id}
    assert {f["actor"] for f in entries[4:]} == {"cli"}


def test_pattern_limits_listed_added_and_removed_from_the_page(web, r, tok, admin):
    csrf = csrf_for(tok[P])
    res = form_post(web, f"/admin/{P}/limit-add", dict(ACTIONS["limit-add"], csrf=csrf), tok[P])
    assert res.status_code == 303 and "limit+users+set" in res.headers["location"]
    assert [(x["name"], x["pattern"], x["rate"]) for x in limits.list_limits(admin, P)] == [
        ("users", "type:user", "10/m")
    ]
    shown = page(web, f"/admin/{P}", tok[P]).text
    assert "<td>users</td><td>type:user</td><td>10/m</td>" in shown
    assert shown.count("<form method=post") == len(ACTIONS)  # now one remove form
    assert shown.count(f'name=csrf value="{csrf}"') == len(ACTIONS)
    res = form_post(web, f"/admin/{P}/limit-remove", {"name": "users", "csrf": csrf}, tok[P])
    assert res.status_code == 303 and limits.list_limits(admin, P) == []
    actions = [fields["action"] for _, fields in r.xrevrange(K.audit)]
    assert actions == ["limit.remove", "limit.add", *SETUP_ACTIONS]


def test_release_continues_past_its_budget(web, r, tok, engine, monkeypatch):
    from tracker_api import admin_pages
    from tracker_core.admin import checks

    monkeypatch.setattr(checks, "MAX_PAGE", 3)  # pages of 3 claims ...
    monkeypatch.setattr(admin_pages, "RELEASE_PAGES", 1)  # ... and one page per post
    engine.claim(P, "alice", "10.0.0.1", 10)
    csrf = csrf_for(tok[P])
    res = form_post(web, f"/admin/{P}/release", {"older_than_s": "60", "csrf": csrf}, tok[P])
    assert res.status_code == 303 and "more+left" in res.headers["location"]
    assert r.zcard(K.out) == 7
    posts = 1
    while True:
        shown = page(web, res.headers["location"], tok[P]).text
        if "Continue releasing" not in shown:
            break
        form = re.search(r'<form method=post action="/admin/proj/release">(.*?)</form>', shown).group(1)
        fields = dict(re.findall(r'name="?(\w+)"? value="([^"]*)"', form))
        assert fields["csrf"] == csrf and fields["older_than_s"] == "60" and fields["cursor"]
        res = form_post(web, f"/admin/{P}/release", fields, tok[P])
        assert res.status_code == 303
        posts += 1
    assert r.zcard(K.out) == 0 and posts == 4
    released = [
        json.loads(f["detail"])["released"]
        for _, f in r.xrevrange(K.audit)
        if f["action"] == "claims.release"
    ]
    assert sorted(released) == [1, 3, 3, 3]


def test_admin_index_shows_warriors(web, r, tok):
    from tracker_core import hq

    warrior_id = hq.register(r, {"version": "<b>3.2</b>"}, "10.1.2.3")
    listing = page(web, "/admin", tok["global"]).text
    # Registered, no heartbeat yet: listed, not online.
    assert "0 online" in listing and warrior_id[:12] in listing
    assert "&lt;b&gt;3.2&lt;/b&gt;" in listing and "10.1.2.3" in listing and "UTC" in listing
    fields, refused = hq.heartbeat_fields(
        {"downloader": "alice", "selected_project": "demo", "lat_lng": [51.5, -0.1]}
    )
    assert not refused and hq.heartbeat(r, warrior_id, fields, "10.1.2.3")
    listing = page(web, "/admin", tok["global"]).text
    assert "1 online" in listing
    assert all(f"<td>{v}</td>" in listing for v in ("alice", "demo", "51.5, -0.1", "yes"))
    mine = page(web, "/admin", tok[P]).text
    assert "1 online" in mine and warrior_id[:12] not in mine and "alice" not in mine


@pytest.mark.parametrize(
    "action,fields,status",
    [
        ("release", {"older_than_s": "1e308"}, 400),
        ("release", {"older_than_s": "nan"}, 400),
        ("release", {"older_than_s": "soon"}, 400),
        ("release", {"downloader": "alice", "cursor": "-1"}, 400),
        ("release", {}, 400),
        ("add-items", {"items": "ok\n" + "x" * 5000}, 400),
        ("add-items", {"items": "ok", "queue": "downloader:x"}, 400),
        ("add-items", {"items": "ok", "queue": "nowhere"}, 400),
        ("limits", {"paused": "maybe"}, 400),
        ("limit-add", {"name": "users", "pattern": "nokind", "rate": "1/s"}, 400),
        ("limit-add", {"name": "users", "pattern": "type:user", "rate": "lots"}, 400),
        ("limit-remove", {"name": "ghost"}, 404),
        ("block", {"entry": "mallory"}, 400),
        ("-init--", {}, 404),
        ("nothing", {}, 404),
    ],
)
def test_bad_form_input_is_refused_counted_and_changes_nothing(web, r, tok, engine, action, fields, status):
    engine.claim(P, "alice", "10.0.0.1", 2)
    before = snapshot(r)
    counted = int(r.hget(K.stats, "admin_bad_request") or 0)
    res = form_post(web, f"/admin/{P}/{action}", dict(fields, csrf=csrf_for(tok[P])), tok[P])
    assert res.status_code == status and res.text.count("\n") == 1, res.text
    assert int(r.hget(K.stats, "admin_bad_request") or 0) == counted + 1
    assert snapshot(r) == before
