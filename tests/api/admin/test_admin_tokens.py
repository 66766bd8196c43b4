"""Scoped, read-only and expiring admin tokens through the app (API and pages) and the CLI: a
token for two projects reaches those and no third; a read-only token reads its scope and is
refused on every write route of ADMIN_ROUTES and every page form (the tables are iterated, so
a new route or form is covered without editing this file); an expired token is answered as a
wrong one; each token's last use is shown and written at most once a minute."""

import json
import string
import urllib.parse

import orjson
import pytest

from support.state import snapshot
from tracker_api.admin.api_routes import ADMIN_ROUTES
from tracker_api.admin.pages import csrf_for
from tracker_api.admin.pages.global_pages import GlobalPages
from tracker_api.admin.pages.project_pages import ProjectPages
from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs

A, B, C = "alpha", "beta", "gamma"
URL_ITEM = "https://example.com/page?id=1&x=%20y#top"
# A value for every path parameter the routes name; one not listed here gets "x".
PATH_VALUES = dict(project=A, queue="todo", token_id="0123456789ab", name="users", secret_id="0123456789ab")


@pytest.fixture
def tok(admin):
    for project in (A, B, C):
        project_verbs.create(admin, project)
        item_verbs.add(admin, project, [URL_ITEM, URL_ITEM + "2"])
    return {
        "global": tokens.create(admin.conn, "*", "ops")[0],
        "both": tokens.create(admin.conn, f"{A},{B}", "two projects")[0],
        "ro": tokens.create(admin.conn, f"{A},{B}", "watcher", read_only=True)[0],
        "ro_global": tokens.create(admin.conn, "*", "global watcher", read_only=True)[0],
    }


def call(web, method, path, token=None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return web.simulate_request(
        method, path, headers=headers, body=orjson.dumps(body) if body is not None else None
    )


def ok(res):
    assert res.status_code == 200, res.text
    return res.json


def route_path(path: str) -> str:
    fields = {name for _, name, _, _ in string.Formatter().parse(path) if name}
    return path.format(**{name: PATH_VALUES.get(name, "x") for name in fields})


WRITES = [route for route in ADMIN_ROUTES if route[0] not in ("GET", "HEAD")]
READS = [route for route in ADMIN_ROUTES if route[0] == "GET"]


# -- scopes -------------------------------------------------------------------------------------


def test_a_token_for_two_projects_reaches_both_and_no_third(web, r, tok, admin):
    made = ok(call(web, "POST", "/api/admin/tokens", tok["global"], {"scope": [A, B], "note": "pair"}))
    assert made["scope"] == f"{A},{B}" and made["read_only"] is False and made["expires_ms"] is None
    for token in (made["token"], tok["both"]):
        assert ok(call(web, "GET", "/api/admin/projects", token)) == {"projects": [A, B]}
        for project in (A, B):
            ok(call(web, "GET", f"/api/admin/projects/{project}", token))
        ok(call(web, "POST", f"/api/admin/projects/{B}/pause", token))
        before = snapshot(r)
        third = call(web, "POST", f"/api/admin/projects/{C}/pause", token)
        assert (
            third.status_code == 403
            and third.text == f'{{"error":"this token is not for project \'{C}\'"}}\n'
        )
        assert call(web, "GET", f"/api/admin/projects/{C}/queues", token).status_code == 403
        assert call(web, "GET", "/api/admin/audit", token).status_code == 403  # not a global admin
        assert snapshot(r) == before
    assert project_verbs.show(admin, C)["settings"]["paused"] in ("0", 0, False)


@pytest.mark.parametrize(
    "body,status",
    [
        ({"scope": ",".join(f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS))}, 200),
        ({"scope": [f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS)]}, 200),
        ({"scope": ",".join(f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS + 1))}, 400),
        # The longest names, with a space after each comma: the text's bound takes them all.
        ({"scope": ", ".join(f"{i:02d}" + "n" * 62 for i in range(tokens.MAX_SCOPE_PROJECTS))}, 200),
        ({"scope": ", ".join(f"{i:02d}" + "n" * 62 for i in range(tokens.MAX_SCOPE_PROJECTS + 1))}, 400),
        ({"scope": [f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS + 1)]}, 400),
        ({"scope": [A, "No Way"]}, 400),
        ({"scope": []}, 400),
        ({"scope": [A, 7]}, 400),
        ({"scope": f"*,{A}"}, 400),
        ({"scope": "*", "expires": f"{tokens.MAX_EXPIRY_DAYS}d"}, 200),
        ({"scope": "*", "expires": f"{tokens.MAX_EXPIRY_DAYS + 1}d"}, 400),
        ({"scope": "*", "expires": "0m"}, 400),
        ({"scope": "*", "expires": "2001-01-01"}, 400),
        ({"scope": "*", "expires": "whenever"}, 400),
        ({"scope": "*", "expires": 30}, 400),
        ({"scope": "*", "read_only": "yes"}, 400),
        ({"scope": "*", "note": "n" * tokens.MAX_NOTE}, 200),
        ({"scope": "*", "note": "n" * (tokens.MAX_NOTE + 1)}, 400),
    ],
)
def test_token_limits_at_and_past_them(web, r, tok, body, status):
    before = snapshot(r)
    res = call(web, "POST", "/api/admin/tokens", tok["global"], body)
    assert res.status_code == status, res.text
    if status == 400:
        assert res.text.count("\n") == 1 and snapshot(r) == before
        assert int(r.hget(keyspace.GLOBAL_STATS, "admin_bad_request")) == 1


# -- read-only ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method,path,needs,handler", WRITES, ids=[f"{m} {p}" for m, p, _, _ in WRITES])
def test_a_read_only_token_is_refused_on_every_write_route(web, r, tok, method, path, needs, handler):
    before = snapshot(r)
    refused = 0
    for token in (tok["ro_global"], tok["ro"]):
        res = call(web, method, route_path(path), token, {})
        if token == tok["ro"] and needs == "global":
            assert res.status_code == 403  # not a global admin first
        else:
            assert res.status_code == 403, res.text
            assert res.json == {"error": "this token is read-only: it changes nothing"}
        assert res.text.count("\n") == 1
        refused += 1
    assert snapshot(r) == before
    assert int(r.hget(keyspace.GLOBAL_STATS, "admin_forbidden")) == refused


@pytest.mark.parametrize("method,path,needs,handler", READS, ids=[f"{m} {p}" for m, p, _, _ in READS])
def test_a_read_only_token_reads_every_read_route_of_its_scope(web, r, tok, method, path, needs, handler):
    readers = [tok["ro_global"]] + ([tok["ro"]] if needs != "global" else [])
    for token in readers:
        res = call(
            web, method, route_path(path) + ("?name=" + URL_ITEM if path.endswith("/item") else ""), token
        )
        assert res.status_code not in (401, 403), (token, res.text)
    if needs == "global":
        assert call(web, method, route_path(path), tok["ro"]).status_code == 403


def test_a_read_only_token_sees_only_its_projects_and_changes_nothing(web, r, tok):
    assert ok(call(web, "GET", "/api/admin/projects", tok["ro"])) == {"projects": [A, B]}
    assert ok(call(web, "GET", "/api/admin/projects", tok["ro_global"])) == {"projects": [A, B, C]}
    assert ok(call(web, "GET", f"/api/admin/projects/{A}/queues/todo", tok["ro"]))["count"] == 2
    assert call(web, "GET", f"/api/admin/projects/{C}/queues/todo", tok["ro"]).status_code == 403
    # A read-only global token lists tokens (no secret in a listing) but makes none.
    listed = ok(call(web, "GET", "/api/admin/tokens", tok["ro_global"]))["tokens"]
    assert len(listed) == 4 and all("token" not in t and "sha256" not in t for t in listed)
    assert call(web, "POST", "/api/admin/tokens", tok["ro_global"], {"scope": "*"}).status_code == 403
    assert len(r.hgetall(keyspace.ADMIN_TOKENS)) == 4


def form_post(web, path, fields, token):
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"tracker_admin={token}"}
    return web.simulate_post(path, body=urllib.parse.urlencode(fields), headers=headers)


def page(web, path, token):
    return web.simulate_get(path, headers={"Cookie": f"tracker_admin={token}"})


def test_a_read_only_token_reads_the_pages_and_every_form_is_refused(web, r, tok):
    for path in (f"/admin/{A}", f"/admin/{A}/queues", f"/admin/{B}/settings"):
        res = page(web, path, tok["ro"])
        assert res.status_code == 200 and "This token is read-only" in res.text, path
    index = page(web, "/admin", tok["ro"]).text
    assert f'href="/admin/{A}"' in index and f'href="/admin/{C}"' not in index
    assert page(web, f"/admin/{C}", tok["ro"]).status_code == 403
    assert page(web, "/admin/-/tokens", tok["ro_global"]).status_code == 200
    before = snapshot(r)
    for action in ProjectPages.ACTIONS:
        res = form_post(web, f"/admin/{A}/{action}", {"csrf": csrf_for(tok["ro"]), "confirm": A}, tok["ro"])
        assert res.status_code == 403, action
        assert "read-only" in res.text or action == "delete", action  # delete: a global action
    for action in set(GlobalPages.ACTIONS) - {"logout"}:
        fields = {"csrf": csrf_for(tok["ro_global"]), "scope": "*", "project": "newproj"}
        res = form_post(web, f"/admin/-/{action}", fields, tok["ro_global"])
        assert res.status_code == 403 and "read-only" in res.text, action
    assert snapshot(r) == before
    out = form_post(web, "/admin/-/logout", {"csrf": csrf_for(tok["ro"])}, tok["ro"])
    assert out.status_code == 303  # logging out changes nothing in Redis


# -- expiry -------------------------------------------------------------------------------------


def test_an_expired_token_is_refused_exactly_like_a_wrong_one(web, r, tok):
    expired = tokens.create(r, "*", "gone", expires_ms=1_000)[0]  # long past, by Redis's clock
    wrong = tok["global"][:-1] + ("A" if tok["global"][-1] != "A" else "B")
    for path in ("/api/admin/projects", f"/api/admin/projects/{A}", "/api/admin/tokens"):
        answers = [call(web, "GET", path, token) for token in (expired, wrong)]
        assert [(a.status_code, a.text) for a in answers][0] == (answers[1].status_code, answers[1].text)
        assert answers[0].status_code == 401
    pages = [page(web, f"/admin/{A}", token) for token in (expired, wrong)]
    assert pages[0].status_code == pages[1].status_code == 401 and pages[0].text == pages[1].text
    metrics = [
        web.simulate_get("/metrics", headers={"Authorization": f"Bearer {t}"}) for t in (expired, wrong)
    ]
    assert metrics[0].status_code == metrics[1].status_code == 401 and metrics[0].text == metrics[1].text
    # The index shows the login form again for either.
    assert (
        'name="token"' in page(web, "/admin", expired).text
        or "name=token" in page(web, "/admin", expired).text
    )


def test_a_token_created_with_an_expiry_carries_it_and_is_audited_without_its_secret(web, r, tok):
    made = ok(
        call(
            web,
            "POST",
            "/api/admin/tokens",
            tok["global"],
            {"scope": f"{A},{B}", "read_only": True, "expires": "30d", "note": "helper"},
        )
    )
    now_ms = int(r.time()[0]) * 1000
    assert abs(made["expires_ms"] - (now_ms + 30 * tokens.DAY_MS)) < 5_000
    entry = r.xrevrange(keyspace.AUDIT, count=1)[0][1]
    detail = json.loads(entry["detail"])
    assert entry["action"] == "token.create" and entry["project"] == ""
    assert detail == {
        "token_id": made["token_id"],
        "scope": f"{A},{B}",
        "read_only": True,
        "expires_ms": made["expires_ms"],
        "note": "helper",
    }
    secret = made["token"][len("trk_123456789abc_") :]
    audit_text = json.dumps(r.xrange(keyspace.AUDIT))
    assert made["token"] not in audit_text and secret not in audit_text
    ok(call(web, "DELETE", f"/api/admin/tokens/{made['token_id']}", tok["global"]))
    revoked = r.xrevrange(keyspace.AUDIT, count=1)[0][1]
    assert revoked["action"] == "token.revoke" and secret not in json.dumps(r.xrange(keyspace.AUDIT))


# -- last use -----------------------------------------------------------------------------------


def listed(web, tok) -> dict:
    return {t["token_id"]: t for t in ok(call(web, "GET", "/api/admin/tokens", tok["global"]))["tokens"]}


def test_last_use_is_shown_and_written_at_most_once_a_minute(web, r, tok):
    token_id = tok["both"].split("_")[1]
    assert listed(web, tok)[token_id]["last_used_ms"] is None  # never used
    ok(call(web, "GET", f"/api/admin/projects/{A}", tok["both"]))
    first = listed(web, tok)[token_id]["last_used_ms"]
    assert abs(first - int(r.time()[0]) * 1000) < 5_000
    # Within the minute, further uses write nothing: a value set behind the process's back stays.
    r.hset(keyspace.ADMIN_TOKENS_USED, token_id, 1)
    for _ in range(5):
        ok(call(web, "GET", f"/api/admin/projects/{A}", tok["both"]))
    assert listed(web, tok)[token_id]["last_used_ms"] == 1
    # A refused use (a project outside the scope) writes nothing either.
    r.hdel(keyspace.ADMIN_TOKENS_USED, tok["ro"].split("_")[1])
    assert call(web, "POST", f"/api/admin/projects/{A}/pause", tok["ro"]).status_code == 403
    assert listed(web, tok)[tok["ro"].split("_")[1]]["last_used_ms"] is None
    shown = page(web, "/admin/-/tokens", tok["global"]).text
    assert "last used" in shown and "read-only" in shown and "never" in shown


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_creates_lists_and_revokes_scoped_read_only_expiring_tokens(cli, web, r, tok):
    res = cli(
        "--json",
        "admin",
        "token",
        "create",
        "--scope",
        f"{A},{B}",
        "--read-only",
        "--expires",
        "12h",
        "--note",
        "watcher",
    )
    assert res.exit_code == 0, res.output
    made = json.loads(res.output)
    assert (made["scope"], made["read_only"]) == (f"{A},{B}", True)
    assert ok(call(web, "GET", f"/api/admin/projects/{A}/queues", made["token"]))
    assert call(web, "POST", f"/api/admin/projects/{A}/pause", made["token"]).status_code == 403
    table = cli("admin", "token", "list")
    assert table.exit_code == 0
    row = next(line for line in table.output.splitlines() if made["token_id"] in line)
    assert "read-only" in row and f"{A},{B}" in row and "watcher" in row and made["token"] not in table.output
    assert "LAST_USED" in table.output.splitlines()[0]
    for args, code in (
        (["--scope", ",".join(f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS))], 0),
        (["--scope", ",".join(f"p{i:02d}" for i in range(tokens.MAX_SCOPE_PROJECTS + 1))], 1),
        (["--expires", f"{tokens.MAX_EXPIRY_DAYS}d"], 0),
        (["--expires", f"{tokens.MAX_EXPIRY_DAYS + 1}d"], 1),
        (["--expires", "yesterday"], 1),
    ):
        out = cli("admin", "token", "create", *args)
        assert out.exit_code == code, (args, out.output)
        if code:
            assert len(out.output.strip().splitlines()) == 1
    assert cli("admin", "token", "revoke", made["token_id"]).exit_code == 0
    assert call(web, "GET", f"/api/admin/projects/{A}/queues", made["token"]).status_code == 401
