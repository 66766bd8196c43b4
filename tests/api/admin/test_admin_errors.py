"""The admin faces over the verbs: one error map by type (BadInput 400, NotFound 404, Conflict 409,
Redis unreachable 503) answered as JSON by the API and as a page by the admin pages, and one
audit record per change, written by the verb under the caller's token."""

import socket
import urllib.parse

import orjson
import pytest
from falcon import testing

from tracker_api.admin.pages import csrf_for
from tracker_api.app import create_app
from tracker_api.web.errors import admin_refusal
from tracker_core import keyspace
from tracker_core.access import audit, tokens
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput, Conflict, NotFound

P = "proj"
K = keyspace.ProjectKeys(P)
# URL item names as the biggest projects queue them.
NAMES = ["https://example.com/a b/?q=%20#frag", "https://example.com/" + "x/" * 600 + "?page=2"]


@pytest.fixture
def token(admin):
    project_verbs.create(admin, P)
    return tokens.create(admin.conn, "*")[0]


def call(web, method, path, token, body=None):
    return web.simulate_request(
        method,
        path,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=None if body is None else orjson.dumps(body),
    )


@pytest.mark.parametrize(
    "error,status,field",
    [
        (BadInput("unknown project 'x'"), 400, "admin_bad_request"),  # the text says "unknown": still 400
        (NotFound("bad name"), 404, "admin_bad_request"),
        (Conflict("no such thing"), 409, "admin_conflict"),
        (AdminError("plain\nsecond line"), 400, "admin_bad_request"),
    ],
)
def test_the_status_comes_from_the_type_never_the_text(error, status, field):
    refused = admin_refusal(error, P)
    assert (refused.status, refused.field, refused.project) == (status, field, P)
    assert refused.reason == str(error).splitlines()[0]


@pytest.mark.parametrize(
    "method,path,body,status,reason",
    [
        ("POST", "/api/admin/projects", {"project": "Bad Name"}, 400, "bad project name"),
        ("GET", "/api/admin/projects/nope", None, 404, "unknown project 'nope'"),
        ("POST", "/api/admin/projects", {"project": P}, 409, "already exists"),
        ("DELETE", "/api/admin/tokens/0123456789ab", None, 404, "no token"),
    ],
)
def test_each_typed_error_is_its_status_with_a_json_body(
    engine, r, token, method, path, body, status, reason
):
    web = testing.TestClient(create_app(engine))
    before = {k: r.hgetall(k) for k in (keyspace.GLOBAL_STATS, K.stats)}
    res = call(web, method, path, token, body)
    assert res.status_code == status, res.text
    assert res.headers["content-type"].startswith("application/json")
    assert set(res.json) == {"error"} and reason in res.json["error"]
    assert res.text.count("\n") == 1 and res.text.endswith("}\n")
    counted = {k: r.hgetall(k) for k in (keyspace.GLOBAL_STATS, K.stats)}
    assert counted != before  # counted, as every refusal is


def test_redis_unreachable_is_a_503_in_json(engine, token):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = AdminContext.from_url(f"redis://127.0.0.1:{port}/0")
    web = testing.TestClient(create_app(engine, gone))
    res = call(web, "GET", "/api/admin/projects", token)
    assert res.status_code == 503 and set(res.json) == {"error"}, res.text


def test_an_admin_api_change_is_audited_exactly_once_by_the_verb(engine, r, token):
    """Through a context whose own actor is "cli": the record names the caller's token."""
    web = testing.TestClient(create_app(engine, AdminContext.from_url(engine.redis_url, actor="cli")))
    # One record: one entry in the global log, mirrored in the project's.
    before = (r.xlen(keyspace.AUDIT), r.xlen(K.audit))
    res = call(web, "POST", f"/api/admin/projects/{P}/queues/todo/items", token, {"items": NAMES})
    assert res.status_code == 200 and res.json == {"added": 2, "duplicates": 0}, res.text
    assert (r.xlen(keyspace.AUDIT), r.xlen(K.audit)) == (before[0] + 1, before[1] + 1)
    [(_, entry)] = r.xrevrange(K.audit, count=1)
    assert entry["action"] == "items.add" and entry["actor"] == tokens.verify(r, token).token_id
    assert r.smembers(K.todo) == set(NAMES)
    # A refused change records nothing.
    assert (
        call(
            web, "POST", f"/api/admin/projects/{P}/queues/nowhere/items", token, {"items": NAMES}
        ).status_code
        == 400
    )
    assert (r.xlen(keyspace.AUDIT), r.xlen(K.audit)) == (before[0] + 1, before[1] + 1)
    assert audit.read(r, P, 10, None)["entries"][0]["action"] == "items.add"


def test_the_pages_show_a_refusal_in_a_page(engine, r, token):
    web = testing.TestClient(create_app(engine))
    project_token = tokens.create(r, P)[0]
    res = web.simulate_post(
        f"/admin/{P}/limit-remove",
        body=urllib.parse.urlencode({"name": "<ghost>", "csrf": csrf_for(project_token)}),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"tracker_admin={project_token}",
        },
    )
    assert res.status_code == 404 and res.headers["content-type"].startswith("text/html")
    assert "<h1>404 Not Found</h1>" in res.text and "&lt;ghost&gt;" in res.text and "<ghost>" not in res.text
    assert 'href="/admin"' in res.text and res.headers["x-frame-options"] == "DENY"
