"""Server-rendered admin pages: login cookie, CSRF and 401/403 everywhere; every page renders with
its forms, every form acts through its verb (state asserted in Redis, audited once), and a refused
form answers its page with the reason inside that form and what was typed kept."""

import html
import json
import re
import urllib.parse
from html.parser import HTMLParser

import pytest

from support.state import snapshot
from tracker_api.admin.pages import csrf_for
from tracker_api.admin.pages.project_pages import ProjectPages
from tracker_core.access import tokens
from tracker_core.admin import backfeed_verbs, hq_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import HQ as HQ_KEY
from tracker_core.keyspace import ProjectKeys

P, OTHER = "proj", "other"
K = ProjectKeys(P)
URL_ITEM = "https://example.com/a b/?q=%20&x=1#frag"
# Every form of a project page: action -> fields that act.
ACTIONS = {
    "add-items": {"items": "a1\na2\n", "queue": "todo"},
    "settings": {"rate_limit": "120", "max_claims_per_downloader": "4"},
    "limit-add": {"name": "users", "pattern": "type:user", "rate": "10/m"},
    "limit-remove": {"name": "users"},
    "release": {"downloader": "alice"},
    "block": {"entry": "name:mallory"},
    "pause": {},
    "resume": {},
    "delete": {"confirm": P},
    "upload-target": {"url": "https://up.example/x/", "state": "active"},
    "move": {"source": "todo", "target": "secondary", "pattern": "*"},
    "clear": {"queue": "todo", "confirm": "1"},
    "redo": {"pattern": "*", "queue": "redo"},
    "reclassify": {},
    "requeue": {"all": "1", "queue": "todo"},
    "secret-create": {},
    "secret-revoke": {"id": "abcdef"},
    "shard-map": {"shard": "s1", "queue": "secondary"},
    "shard-unmap": {"shard": "s1"},
    "filter": {"kind": "wide", "capacity": "100", "fp_rate": "0.01"},
    "segment-export": {"segment": "1"},
    "segment-import": {"file": "x", "queue": "todo"},
}
# The page each action's form is on.
VIEW_OF = {
    "add-items": "",
    "pause": "",
    "block": "",
    "delete": "",
    "settings": "/settings",
    "limit-add": "/settings",
    "upload-target": "/settings",
    "move": "/queues",
    "clear": "/queues",
    "redo": "/queues",
    "reclassify": "/settings",
    "release": "/claims",
    "secret-create": "/backfeed",
    "shard-map": "/backfeed",
    "filter": "/filter",
    "segment-import": "/segments",
}
# Every project page the app has (a page added there is checked here too).
VIEWS = tuple("" if view == "overview" else f"/{view}" for view in ProjectPages.VIEWS)
GLOBAL_VIEWS = {
    "tokens": "token-create",
    "blocks": "block",
    "hq": "hq",
    "warriors": None,
    "audit": None,
}


@pytest.fixture
def tok(admin):
    project_verbs.create(admin, P)
    project_verbs.create(admin, OTHER)
    item_verbs.add(admin, P, [f"item{n}" for n in range(10)])
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


class FormReader(HTMLParser):
    """The POST forms of a page as a browser would submit them: (action, [(name, value)])."""

    def __init__(self):
        super().__init__()
        self.forms, self.select, self.textarea, self.options = [], None, None, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("method") == "post":
            self.forms.append((a["action"], []))
        elif not self.forms or "name" not in a and tag != "option":
            return
        elif tag == "input" and (a.get("type") not in ("checkbox",) or "checked" in a):
            self.forms[-1][1].append((a["name"], a.get("value") or ""))
        elif tag == "select":
            self.select, self.options = a["name"], []
        elif tag == "option" and self.select:
            self.options.append(("selected" in a, a.get("value")))
        elif tag == "textarea":
            self.textarea = (a["name"], [])

    def handle_data(self, data):
        if self.textarea:
            self.textarea[1].append(data)
        elif self.select and self.options and self.options[-1][1] is None:
            self.options[-1] = (self.options[-1][0], data)

    def handle_endtag(self, tag):
        if tag == "select" and self.select:
            chosen = [v for selected, v in self.options if selected] or [v for _, v in self.options[:1]]
            self.forms[-1][1].append((self.select, chosen[0] if chosen else ""))
            self.select = None
        elif tag == "textarea" and self.textarea:
            self.forms[-1][1].append((self.textarea[0], "".join(self.textarea[1])))
            self.textarea = None


def forms_in(text):
    """Each POST form of a page: (action, its fields as name -> the value a browser sends)."""
    reader = FormReader()
    reader.feed(text)
    return [(action, dict(pairs)) for action, pairs in reader.forms]


def test_project_page_shows_queues_and_carries_csrf(web, tok):
    res = page(web, f"/admin/{P}", tok[P])
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    assert re.search(r"<td>todo</td><td>10</td>", res.text)
    assert f'href="/{P}/"' in res.text  # the leaderboard
    assert 'action="/admin/-/logout"' in res.text
    # A project token sees no delete form (deleting needs a global admin).
    assert f'action="/admin/{P}/delete"' not in res.text
    assert f'action="/admin/{P}/delete"' in page(web, f"/admin/{P}", tok["global"]).text


@pytest.mark.parametrize("view", VIEWS)
def test_every_project_page_renders_with_its_forms_and_csrf(web, tok, view):
    res = page(web, f"/admin/{P}{view}", tok["global"])
    assert res.status_code == 200, res.text
    assert res.text.startswith("<!doctype html>") and "/static/admin.css" in res.text
    forms = forms_in(res.text)
    assert forms and all(fields.get("csrf") == csrf_for(tok["global"]) for _, fields in forms)
    for action, on in VIEW_OF.items():
        assert (f'action="/admin/{P}/{action}"' in res.text) == (on == view), action
    for other in VIEWS:  # the tabs
        assert f'href="/admin/{P}{other}"' in res.text


@pytest.mark.parametrize("view,form", sorted(GLOBAL_VIEWS.items()))
def test_every_global_page_renders_for_global_admins_only(web, tok, view, form):
    res = page(web, f"/admin/-/{view}", tok["global"])
    assert res.status_code == 200, res.text
    if form:
        assert f'action="/admin/-/{form}"' in res.text
    assert all(fields.get("csrf") == csrf_for(tok["global"]) for _, fields in forms_in(res.text))
    assert page(web, f"/admin/-/{view}", tok[P]).status_code == (200 if view == "warriors" else 403)
    assert page(web, f"/admin/-/{view}").status_code == 401
    assert page(web, "/admin/-/nothing", tok["global"]).status_code == 404


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


@pytest.mark.parametrize(
    "action",
    [
        "token-create",
        "token-revoke",
        "block",
        "blocks-reindex",
        "hq",
        "hq-banner",
        "create-project",
        "logout",
    ],
)
def test_every_global_action_needs_a_global_token_and_csrf(web, r, tok, action):
    fields = {"csrf": csrf_for(tok["global"]), "scope": "*", "entry": "name:x", "project": "new"}
    before = snapshot(r)
    assert form_post(web, f"/admin/-/{action}", fields).status_code == 401
    assert (
        form_post(web, f"/admin/-/{action}", {**fields, "csrf": "0" * 64}, tok["global"]).status_code == 403
    )
    if action != "logout":  # any logged-in token may log out
        assert (
            form_post(web, f"/admin/-/{action}", {**fields, "csrf": csrf_for(tok[P])}, tok[P]).status_code
            == 403
        )
    assert snapshot(r) == before


def test_page_actions_change_state_and_are_audited(web, r, tok, engine):
    csrf = csrf_for(tok[P])
    res = form_post(web, f"/admin/{P}/add-items", dict(ACTIONS["add-items"], csrf=csrf), tok[P])
    assert res.status_code == 303 and "added+2" in res.headers["location"]
    assert r.sismember(K.todo, "a1") and r.scard(K.todo) == 12
    res = form_post(web, f"/admin/{P}/settings", dict(ACTIONS["settings"], csrf=csrf), tok[P])
    assert res.headers["location"].startswith(f"/admin/{P}/settings?done=settings+saved")
    assert r.hget(K.settings, "rate_limit") == "120"
    assert r.hget(K.settings, "max_claims_per_downloader") == "4"
    engine.claim(P, "alice", "10.0.0.1", 3)
    form_post(web, f"/admin/{P}/release", dict(ACTIONS["release"], csrf=csrf), tok[P])
    assert r.zcard(K.out) == 0
    form_post(web, f"/admin/{P}/block", dict(ACTIONS["block"], csrf=csrf), tok[P])
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 403
    bad = form_post(web, f"/admin/{P}/settings", {"rate_limit": "lots", "csrf": csrf}, tok[P])
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


def test_settings_form_has_widgets_and_saves_only_what_changed(web, r, tok):
    csrf = csrf_for(tok[P])
    shown = page(web, f"/admin/{P}/settings", tok[P]).text
    assert '<input type=hidden name="paused" value=0><input type=checkbox name="paused" value=1>' in shown
    assert re.search(r'<select name="done_mode">.*<option selected>keep</option>', shown)
    assert re.search(r'name="reclaim_ttl_s" value="[0-9.]+"><span>s</span>', shown)
    assert 'name="max_bytes_per_item"' in shown and "<span>bytes</span>" in shown
    # The form as a browser posts it: every field, the unticked box as its hidden 0.
    fields = {}
    for action, found in forms_in(shown):
        if action == f"/admin/{P}/settings":
            fields = found
    assert fields["paused"] == "0" and fields["done_mode"] == "keep"
    res = form_post(web, f"/admin/{P}/settings", {**fields, "paused": "1", "done_mode": "discard"}, tok[P])
    assert res.status_code == 303 and "done_mode%2C+paused" in res.headers["location"]
    assert r.hget(K.settings, "paused") == "1" and r.hget(K.settings, "done_mode") == "discard"
    actions = [f for _, f in r.xrevrange(K.audit, count=1)]
    assert actions[0]["action"] == "project.settings"
    assert json.loads(actions[0]["detail"])["settings"] == {"paused": "1", "done_mode": "discard"}
    res = form_post(web, f"/admin/{P}/settings", {"paused": "1", "csrf": csrf}, tok[P])
    assert "no+setting+changed" in res.headers["location"] and r.xlen(K.audit) == len(SETUP_ACTIONS) + 1


def test_project_actions_act_through_the_verbs(web, r, tok, admin, engine):
    csrf = csrf_for(tok["global"])

    def post(action, **fields):
        res = form_post(web, f"/admin/{P}/{action}", {**fields, "csrf": csrf}, tok["global"])
        assert res.status_code in (200, 303), res.text
        return res

    post("pause")
    assert r.hget(K.settings, "paused") == "1"
    assert "paused" in page(web, f"/admin/{P}", tok["global"]).text
    post("resume")
    assert r.hget(K.settings, "paused") == "0"
    post("upload-target", url="https://up.example/x/", state="active")
    assert r.hgetall(K.upload_targets) == {"https://up.example/x/": "active"}
    post("upload-target", url="https://up.example/x/", state="remove")
    assert r.hgetall(K.upload_targets) == {}
    res = post("move", source="todo", target="secondary", pattern="item1*")
    assert "moved+1+from+todo+to+secondary" in res.headers["location"]
    assert r.smembers(K.secondary) == {"item1"} and r.scard(K.todo) == 9
    post("clear", queue="secondary", confirm="1")
    assert r.scard(K.secondary) == 0
    # Redo: done items queued again, by name and by a pattern over done items.
    r.sadd(K.done, URL_ITEM, "old2")
    res = post("redo", items=URL_ITEM + "\n", queue="redo")
    assert "requeued+1+to+redo" in res.headers["location"] and r.smembers(K.redo) == {URL_ITEM}
    res = post("redo", pattern="old*", queue="secondary")
    assert "requeued+1+to+secondary" in res.headers["location"] and r.smembers(K.secondary) == {"old2"}
    assert not r.sismember(K.done, "old2")
    post("clear", queue="secondary", confirm="1")
    post("clear", queue="redo", confirm="1")
    # Reclassify: a limit added without reclassifying holds the queued items it matches.
    limit_verbs.add(admin, P, "eights", "regex:item8", "1/m", reclassify=False)
    res = post("reclassify")
    assert "1+queued+items+now+held" in res.headers["location"] and not r.sismember(K.todo, "item8")
    limit_verbs.remove(admin, P, "eights")
    post("shard-map", shard="s1", queue="secondary")
    assert backfeed_verbs.shard_map(admin, P)["map"] == {"s1": "secondary"}
    post("shard-unmap", shard="s1")
    assert backfeed_verbs.shard_map(admin, P)["map"] == {}
    # A backfeed secret is shown once, in the page (never in a URL), and only its hash kept.
    res = post("secret-create")
    assert res.status_code == 200 and "location" not in res.headers
    (made,) = backfeed_verbs.list_secrets(admin, P)
    secret = re.search(rf"/backfeed/legacy/{P}-([\w-]+)", res.text).group(1)
    assert "shown only this once" in res.text and secret not in str(r.hgetall(K.backfeed_secrets))
    assert secret not in page(web, f"/admin/{P}/backfeed", tok["global"]).text
    post("secret-revoke", id=made["id"])
    assert backfeed_verbs.list_secrets(admin, P) == []
    r.hset(K.dead, mapping={URL_ITEM: json.dumps({"times_claimed": 4}), "dead2": "{}", "dead3": "{}"})
    dead_page = page(web, f"/admin/{P}/dead", tok["global"]).text
    assert "https://example.com/a b/?q=%20&amp;x=1#frag" in dead_page
    res = form_post(
        web,
        f"/admin/{P}/requeue",
        [("csrf", csrf), ("item", URL_ITEM), ("item", "dead2"), ("queue", "redo")],
        tok["global"],
    )
    assert "requeued+2+to+redo" in res.headers["location"]
    assert r.smembers(K.redo) == {URL_ITEM, "dead2"} and r.hkeys(K.dead) == ["dead3"]
    post("requeue", all="1", queue="todo")
    assert r.hlen(K.dead) == 0 and r.sismember(K.todo, "dead3")
    audited = [f["action"] for _, f in r.xrevrange(K.audit, count=2)]
    assert audited == ["dead.requeue", "dead.requeue"]
    res = post("delete", confirm=P)
    assert res.headers["location"].startswith("/admin?done=project+proj+deleted")
    assert P not in project_verbs.list_projects(admin)


def test_items_added_from_an_uploaded_file(web, r, tok):
    names = [URL_ITEM, "x" * 3000, "plain"]
    body, content_type = multipart(
        {"csrf": csrf_for(tok[P]), "items": "typed", "queue": "secondary"},
        ("file", "items.txt", ("\r\n".join(names) + "\n").encode()),
    )
    res = web.simulate_post(
        f"/admin/{P}/add-items",
        body=body,
        headers={"Content-Type": content_type, "Cookie": f"tracker_admin={tok[P]}"},
    )
    assert res.status_code == 303 and "added+4" in res.headers["location"]
    assert r.smembers(K.secondary) == {*names, "typed"}


def multipart(fields, file):
    boundary = "----trackerboundary7MA4YWxkTrZu0gW"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    name, filename, data = file
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
        "Content-Type: text/plain\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_queue_sample_claims_and_logs_are_listed(web, r, tok, engine):
    engine.claim(P, "alice", "10.0.0.1", 2)
    shown = page(web, f"/admin/{P}/queues?sample=todo&count=5", tok[P]).text
    assert len(re.findall(r"<li><code>item\d</code></li>", shown)) == 5
    bad = page(web, f"/admin/{P}/queues?sample=nowhere", tok[P])
    assert bad.status_code == 400 and "class=error" in bad.text and "<h1>" in bad.text
    claims = page(web, f"/admin/{P}/claims", tok[P]).text
    assert claims.count("<td>alice</td>") == 2 and "10.0.0.1" in claims
    assert page(web, f"/admin/{P}/claims?pattern=nothing*", tok[P]).text.count("<td>alice</td>") == 0
    engine.done(P, "alice", "1", [engine_item(r)], ["example.com", 1234], "{}")
    log_page = page(web, f"/admin/{P}/log", tok[P])
    assert log_page.status_code == 200 and "<td>alice</td>" in log_page.text and "bytes=1234" in log_page.text
    assert page(web, f"/admin/{P}/log?kind=nope", tok[P]).status_code == 400
    audit_page = page(web, f"/admin/{P}/audit", tok[P]).text
    assert "<td>items.add</td>" in audit_page and "<td>project.create</td>" in audit_page
    assert page(web, f"/admin/{P}/audit?before=zz", tok[P]).status_code == 400
    assert "No segments" in page(web, f"/admin/{P}/segments", tok[P]).text


def engine_item(r):
    return r.zrange(K.out, 0, 0)[0]


def test_audit_pages_are_paged(web, r, tok, admin):
    for n in range(105):
        limit_verbs.block(admin, f"name:user{n}", P)
    first = page(web, f"/admin/{P}/audit", tok[P]).text
    assert first.count("<td>block.add</td>") == 100
    older = re.search(r'<a href="\?before=([0-9-]+)">Older', first).group(1)
    second = page(web, f"/admin/{P}/audit?before={older}", tok[P]).text
    assert second.count("<td>block.add</td>") == 5 and "<td>project.create</td>" in second
    assert "<td>block.add</td>" in page(web, "/admin/-/audit", tok["global"]).text


def test_tokens_created_once_listed_and_revoked(web, r, tok, admin):
    csrf = csrf_for(tok["global"])
    res = form_post(
        web, "/admin/-/token-create", {"scope": P, "note": "for <b>bob</b>", "csrf": csrf}, tok["global"]
    )
    assert res.status_code == 200 and "shown only this once" in res.text
    text = re.search(r'class=secret readonly value="(trk_[^"]+)"', res.text).group(1)
    made = tokens.verify(r, text)
    assert made.scope == P
    listing = page(web, "/admin/-/tokens", tok["global"]).text
    assert made.token_id in listing and text not in listing and "for &lt;b&gt;bob&lt;/b&gt;" in listing
    res = form_post(web, "/admin/-/token-revoke", {"token_id": made.token_id, "csrf": csrf}, tok["global"])
    assert res.status_code == 303 and tokens.verify(r, text) is None


def test_global_blocks_hq_and_project_creation(web, r, tok, admin):
    csrf = csrf_for(tok["global"])
    form_post(web, "/admin/-/block", {"entry": "ip:203.0.113.7", "csrf": csrf}, tok["global"])
    assert limit_verbs.blocks(admin)["global"] == ["ip:203.0.113.7"]
    assert "ip:203.0.113.7" in page(web, "/admin/-/blocks", tok["global"]).text
    form_post(web, "/admin/-/block", {"entry": "ip:203.0.113.7", "remove": "1", "csrf": csrf}, tok["global"])
    assert limit_verbs.blocks(admin)["global"] == []
    res = form_post(
        web,
        "/admin/-/hq",
        {"auto_project": P, "seesaw_version": "0.10.3", "broadcast_message": "hi", "csrf": csrf},
        tok["global"],
    )
    assert res.status_code == 303
    assert r.hgetall(HQ_KEY) == {"auto_project": P, "seesaw_version": "0.10.3", "broadcast_message": "hi"}
    shown = page(web, "/admin/-/hq", tok["global"]).text
    assert "<title>HQ document · admin" in shown
    assert f"<option selected>{P}</option>" in shown and 'value="0.10.3"' in shown
    banner = "<b>Archive it all</b>"
    res = form_post(web, "/admin/-/hq-banner", {"tracker_banner_html": banner, "csrf": csrf}, tok["global"])
    assert res.status_code == 303 and r.hget(HQ_KEY, "tracker_banner_html") == banner
    assert r.hget(HQ_KEY, "seesaw_version") == "0.10.3"  # the banner's form sets the banner alone
    assert banner in web.simulate_get("/").text
    # The banner's box shows the banner set, so saving the form again keeps it.
    assert html.escape(banner) in page(web, "/admin/-/hq", tok["global"]).text
    assert hq_verbs.show_fields(admin)["hq"]["tracker_banner_html"] == banner
    res = form_post(
        web, "/admin/-/create-project", {"project": "fresh", "title": "Fresh", "csrf": csrf}, tok["global"]
    )
    assert res.status_code == 303 and "fresh" in project_verbs.list_projects(admin)
    assert project_verbs.show(admin, "fresh")["settings"]["title"] == "Fresh"
    index = page(web, "/admin", tok["global"]).text
    assert 'href="/admin/fresh"' in index and 'href="/fresh/"' in index


def test_logout_forgets_the_cookie(web, tok):
    res = form_post(web, "/admin/-/logout", {"csrf": csrf_for(tok[P])}, tok[P])
    assert res.status_code == 303 and res.headers["location"] == "/admin"
    assert res.cookies["tracker_admin"].value == "" and "Path=/admin" in res.headers["set-cookie"]


def test_release_continues_past_its_budget(web, r, tok, engine, monkeypatch):
    from tracker_api.admin.pages import paging
    from tracker_core.admin import checks

    monkeypatch.setattr(checks, "MAX_PAGE", 3)  # pages of 3 claims ...
    monkeypatch.setattr(paging, "RELEASE_PAGES", 1)  # ... and one page per post
    engine.claim(P, "alice", "10.0.0.1", 10)
    csrf = csrf_for(tok[P])
    res = form_post(web, f"/admin/{P}/release", {"older_than_s": "60", "csrf": csrf}, tok[P])
    assert res.status_code == 303 and "more+left" in res.headers["location"]
    assert r.zcard(K.out) == 7
    posts = 1
    while True:
        shown = page(web, res.headers["location"], tok[P]).text
        if "Continue release" not in shown:
            break
        fields = forms_in(shown)[1][1]  # after logout: the continue form, first on the page
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


def test_warriors_page_shows_the_registry(web, r, tok):
    from tracker_core.warriors import hq

    warrior_id = hq.register(r, {"version": "<b>3.2</b>"}, "10.1.2.3")
    listing = page(web, "/admin/-/warriors", tok["global"]).text
    # Registered, no heartbeat yet: listed, not online.
    assert "0 online" in listing and warrior_id[:12] in listing
    assert "&lt;b&gt;3.2&lt;/b&gt;" in listing and "10.1.2.3" in listing and "UTC" in listing
    fields, refused = hq.heartbeat_fields(
        {"downloader": "alice", "selected_project": "demo", "lat_lng": [51.5, -0.1]}
    )
    assert not refused and hq.heartbeat(r, warrior_id, fields, "10.1.2.3")
    listing = page(web, "/admin/-/warriors", tok["global"]).text
    assert "1 online" in listing
    assert all(f"<td>{v}</td>" in listing for v in ("alice", "demo", "51.5, -0.1", "yes"))
    mine = page(web, "/admin/-/warriors", tok[P]).text
    assert "1 online" in mine and warrior_id[:12] not in mine and "alice" not in mine
    assert "1 online" in page(web, "/admin", tok[P]).text


def test_warriors_page_is_paged(web, r, tok, monkeypatch):
    from tracker_api.admin.pages import global_pages
    from tracker_core.warriors import hq

    monkeypatch.setattr(global_pages, "WARRIORS_SHOWN", 2)
    ids = {hq.register(r, {"version": "1"}, f"10.9.0.{n}")[:12] for n in range(3)}
    first = page(web, "/admin/-/warriors", tok["global"]).text
    assert '<a href="?offset=2">Older' in first
    second = page(web, "/admin/-/warriors?offset=2", tok["global"]).text
    assert {i for i in ids if i in first} | {i for i in ids if i in second} == ids
    for offset in ("x", "\u00b2", "-1"):
        assert page(web, f"/admin/-/warriors?offset={offset}", tok["global"]).status_code == 400


@pytest.mark.parametrize(
    "action,fields,status,kept",
    [
        ("release", {"older_than_s": "1e308"}, 400, "1e308"),
        ("release", {"older_than_s": "nan"}, 400, "nan"),
        ("release", {"older_than_s": "soon"}, 400, "soon"),
        ("release", {"downloader": "alice", "cursor": "-1"}, 400, "alice"),
        ("release", {"downloader": "alice", "cursor": "\u00b2"}, 400, "alice"),
        ("move", {"source": "todo", "target": "redo", "cursor": "1" * 21}, 400, None),
        ("release", {}, 400, None),
        ("add-items", {"items": "ok\n" + "x" * 5000}, 400, "x" * 5000),
        ("add-items", {"items": "ok", "queue": "downloader:x"}, 400, None),
        ("add-items", {"items": URL_ITEM, "queue": "nowhere"}, 400, URL_ITEM),
        ("settings", {"paused": "maybe"}, 400, None),
        ("settings", {"rate_limit": "lots"}, 400, "lots"),
        ("limit-add", {"name": "users", "pattern": "nokind", "rate": "1/s"}, 400, "nokind"),
        ("limit-add", {"name": "users", "pattern": "type:user", "rate": "lots"}, 400, "lots"),
        ("limit-remove", {"name": "ghost"}, 404, None),
        ("block", {"entry": "mallory"}, 400, "mallory"),
        ("move", {"source": "todo", "target": "todo"}, 400, None),
        ("clear", {"queue": "todo"}, 400, None),
        ("clear", {"queue": "nowhere", "confirm": "1"}, 400, None),
        ("upload-target", {"url": "ftp://nope/"}, 400, "ftp://nope/"),
        ("requeue", {"queue": "todo"}, 400, None),
        ("redo", {"items": "a", "pattern": "*"}, 400, "a"),
        ("redo", {"items": URL_ITEM, "queue": "nowhere"}, 400, URL_ITEM),
        ("redo", {}, 400, None),
        ("secret-revoke", {"id": "zz"}, 400, None),
        ("shard-map", {"shard": "s1", "queue": "nowhere"}, 400, "s1"),
        ("shard-unmap", {"shard": "s9"}, 404, None),
        ("-init--", {}, 404, None),
        ("nothing", {}, 404, None),
    ],
)
def test_bad_form_input_is_refused_in_its_form_counted_and_changes_nothing(
    web, r, tok, engine, action, fields, status, kept
):
    engine.claim(P, "alice", "10.0.0.1", 2)
    before = snapshot(r)
    counted = int(r.hget(K.stats, "admin_bad_request") or 0)
    res = form_post(web, f"/admin/{P}/{action}", dict(fields, csrf=csrf_for(tok[P])), tok[P])
    assert res.status_code == status, res.text
    assert int(r.hget(K.stats, "admin_bad_request") or 0) == counted + 1
    assert snapshot(r) == before
    assert res.headers["content-type"].startswith("text/html") and "/static/admin.css" in res.text
    errors = re.findall(r"<p class=error[^>]*>([^<]+)</p>", res.text)
    assert len(errors) == 1, res.text
    if action in ACTIONS and action not in ("limit-remove", "secret-revoke", "shard-unmap"):
        # The reason is inside the form that was posted, with what was typed kept.
        form = re.search(rf'<form method=post action="/admin/{P}/{action}"[^>]*>(.*?)</form>', res.text, re.S)
        assert form and "class=error" in form.group(1)
        if kept is not None:
            assert html.escape(kept, quote=True) in form.group(1)


def test_a_refused_login_shows_the_form_again_without_the_token(web, tok):
    bogus = "trk_000000000000_" + "x" * 43
    res = login(web, bogus)
    assert res.status_code == 401 and "set-cookie" not in res.headers
    assert "name=token" in res.text and "unknown or revoked admin token" in res.text and bogus not in res.text


def test_global_form_refusals_show_in_their_form(web, r, tok):
    csrf = csrf_for(tok["global"])
    before = snapshot(r)
    for path, fields, status, kept in (
        ("/admin/-/create-project", {"project": "Bad Name!"}, 400, "Bad Name!"),
        ("/admin/-/create-project", {"project": P}, 409, P),
        ("/admin/-/token-create", {"scope": "no such", "note": "n1"}, 400, "n1"),
        ("/admin/-/block", {"entry": "nobody"}, 400, "nobody"),
        ("/admin/-/hq", {"auto_project": "Bad!"}, 400, None),
    ):
        res = form_post(web, path, {**fields, "csrf": csrf}, tok["global"])
        assert res.status_code == status, (path, res.text)
        form = re.search(rf'<form method=post action="{path}"[^>]*>(.*?)</form>', res.text, re.S)
        assert form and "class=error" in form.group(1), res.text
        if kept:
            assert html.escape(kept) in form.group(1)
    assert snapshot(r) == before
