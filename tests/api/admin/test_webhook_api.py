"""The webhooks in the admin API: a global token manages every hook under /api/admin/webhooks; a
project's token manages its project's under /api/admin/projects/P/webhooks and sees no other;
refusals are one-line JSON 4xx that change nothing; a read-only token changes nothing."""

from __future__ import annotations

import orjson
import pytest

from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.admin import project_verbs
from tracker_core.notify import hooks

P, OTHER = "hooked", "other"
URL = "https://hooks.example.com/in?room=ops"


@pytest.fixture
def tok(admin):
    project_verbs.create(admin, P)
    project_verbs.create(admin, OTHER)
    return {
        "global": tokens.create(admin.conn, "*", "ops")[0],
        P: tokens.create(admin.conn, P)[0],
        OTHER: tokens.create(admin.conn, OTHER)[0],
        "reader": tokens.create(admin.conn, "*", read_only=True)[0],
    }


def call(web, method, path, token, body=None):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return web.simulate_request(
        method, path, headers=headers, body=None if body is None else orjson.dumps(body)
    )


def test_a_global_token_manages_every_hook_and_sees_the_outbox(web, tok):
    added = call(web, "POST", "/api/admin/webhooks", tok["global"], {"url": URL, "events": ["clock.off"]})
    assert added.status_code == 200 and added.json["secret"].startswith("whsec_")
    own = call(web, "POST", f"/api/admin/projects/{P}/webhooks", tok[P], {"url": URL})
    assert own.status_code == 200 and own.json["project"] == P
    listed = call(web, "GET", "/api/admin/webhooks", tok["global"])
    assert [h["hook_id"] for h in listed.json["webhooks"]] == [added.json["hook_id"], own.json["hook_id"]]
    assert "whsec_" not in listed.text and listed.json["outbox"]["dropped"] == 0
    gone = call(web, "DELETE", f"/api/admin/webhooks/{own.json['hook_id']}", tok["global"])
    assert gone.status_code == 200 and gone.json == {"removed": own.json["hook_id"]}


def test_a_projects_token_sees_and_removes_only_its_projects_hooks(web, tok):
    global_hook = call(web, "POST", "/api/admin/webhooks", tok["global"], {"url": URL}).json["hook_id"]
    theirs = call(web, "POST", f"/api/admin/projects/{OTHER}/webhooks", tok[OTHER], {"url": URL}).json
    mine = call(web, "POST", f"/api/admin/projects/{P}/webhooks", tok[P], {"url": URL}).json
    listed = call(web, "GET", f"/api/admin/projects/{P}/webhooks", tok[P]).json
    assert [h["hook_id"] for h in listed["webhooks"]] == [mine["hook_id"]] and "outbox" not in listed
    for hook_id in (global_hook, theirs["hook_id"]):
        refused = call(web, "DELETE", f"/api/admin/projects/{P}/webhooks/{hook_id}", tok[P])
        assert refused.status_code == 404 and "for project 'hooked'" in refused.json["error"]
    assert call(web, "GET", "/api/admin/webhooks", tok[P]).status_code == 403
    assert call(web, "POST", "/api/admin/webhooks", tok[P], {"url": URL}).status_code == 403
    assert call(web, "GET", f"/api/admin/projects/{OTHER}/webhooks", tok[P]).status_code == 403
    assert (
        call(web, "DELETE", f"/api/admin/projects/{P}/webhooks/{mine['hook_id']}", tok[P]).status_code == 200
    )


@pytest.mark.parametrize(
    "body, status, reason",
    [
        ({"url": "ftp://example.com/"}, 400, "http:// or https://"),
        ({"url": "https://example.com/" + "a" * (hooks.MAX_URL_CHARS - 20)}, 200, None),  # at the bound
        ({"url": "https://example.com/" + "a" * (hooks.MAX_URL_CHARS - 19)}, 400, "at most 2000"),
        ({"url": URL, "events": ["redis.failover"]}, 400, "only a hook without a project"),
        ({"url": URL, "events": "project.drained"}, 400, "list of event names"),
        ({"url": URL, "project": P}, 400, "unknown field"),
        ({"events": ["project.drained"]}, 400, "'url'"),
        ({"url": ["https://example.com/"]}, 400, "'url'"),
    ],
)
def test_refusals_through_a_projects_route(web, tok, r, body, status, reason):
    answer = call(web, "POST", f"/api/admin/projects/{P}/webhooks", tok[P], body)
    assert answer.status_code == status, answer.text
    if reason:
        assert reason in answer.json["error"] and "\n" not in answer.json["error"]
        assert r.hlen(keyspace.NOTIFY_HOOKS) == 0


def test_the_number_of_hooks_at_and_past_its_bound(web, tok, r):
    for i in range(hooks.MAX_HOOKS):
        assert (
            call(web, "POST", "/api/admin/webhooks", tok["global"], {"url": f"{URL}&n={i}"}).status_code
            == 200
        )
    refused = call(web, "POST", f"/api/admin/projects/{P}/webhooks", tok[P], {"url": URL})
    assert refused.status_code == 400 and "100 webhooks already" in refused.json["error"]
    assert r.hlen(keyspace.NOTIFY_HOOKS) == hooks.MAX_HOOKS


def test_a_read_only_token_lists_but_changes_nothing(web, tok, r):
    assert call(web, "GET", "/api/admin/webhooks", tok["reader"]).status_code == 200
    assert call(web, "POST", "/api/admin/webhooks", tok["reader"], {"url": URL}).status_code == 403
    assert r.hlen(keyspace.NOTIFY_HOOKS) == 0


def test_every_change_is_audited_under_the_token(web, tok, admin):
    hook_id = call(web, "POST", f"/api/admin/projects/{P}/webhooks", tok[P], {"url": URL}).json["hook_id"]
    call(web, "DELETE", f"/api/admin/projects/{P}/webhooks/{hook_id}", tok[P])
    entries = call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]).json["entries"]
    actions = [(e["action"], e["detail"].get("hook_id")) for e in entries[:2]]
    assert actions == [("webhook.remove", hook_id), ("webhook.add", hook_id)]
    assert entries[0]["actor"] == tok[P][len("trk_") :][:12]  # the token's id
