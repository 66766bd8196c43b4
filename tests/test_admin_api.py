"""The admin API: tokens (hashed), global and project admins, audit log, every operation; HQ."""
import json
import subprocess

import orjson
import pytest
from falcon import testing

from conftest import TRACKER_BIN
from test_api import snapshot
from tracker_api.admin_api import ADMIN_ROUTES
from tracker_api.app import create_app
from tracker_core import keys as keyspace
from tracker_core import tokens
from tracker_core.keys import ProjectKeys

P, OTHER = "proj", "other"
K = ProjectKeys(P)


@pytest.fixture
def web(engine):
    return testing.TestClient(create_app(engine))


@pytest.fixture
def projects(admin):
    admin.create_project(P)
    admin.create_project(OTHER)
    list(admin.add_items(P, [f"item{n:03d}" for n in range(50)]))
    return P


@pytest.fixture
def tok(admin, projects):
    """Tokens: a global admin's, one for P and one for OTHER."""
    return {"global": tokens.create(admin.r, "*", "ops")[0],
            P: tokens.create(admin.r, P, "proj admin")[0],
            OTHER: tokens.create(admin.r, OTHER)[0]}


def call(web, method, path, token=None, body=None, raw=None, content_type="application/json",
         **kw):
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    return web.simulate_request(method, path, headers=headers, body=data, **kw)


def ok(res):
    assert res.status_code == 200, res.text
    return res.json


# -- authentication: every route ------------------------------------------------------------

def route_path(path):
    return path.format(project=P, queue="todo", token_id="0123456789ab")


BODIES = {"create_project": {"project": "newproj"}, "set_settings": {"title": "x"},
          "move": {"to": "secondary"}, "release": {"older_than_s": 0},
          "block": {"entry": "name:mallory"}, "upload_target": {"url": "rsync://h/m/"},
          "create_token": {"scope": "*"}, "set_hq": {"broadcast_message": "hi"},
          "add_items": {"items": ["zzz"]}}


@pytest.mark.parametrize("method,path,needs,handler", ADMIN_ROUTES,
                         ids=[f"{m} {p}" for m, p, _, _ in ADMIN_ROUTES])
def test_every_admin_route_refuses_missing_bad_and_wrong_tokens(web, r, tok, method, path,
                                                                needs, handler):
    url = route_path(path)
    body = BODIES.get(handler.__name__, {})
    wrong = {"global": tok[P], "project": tok[OTHER], "any": None}[needs]
    revoked = tokens.create(r, "*")[0]
    tokens.revoke(r, revoked.split("_")[1])
    before = snapshot(r)
    attempts = [(None, 401), ("trk_nonsense", 401), (tok["global"][:-1] + "x", 401), (revoked, 401)]
    if wrong:
        attempts.append((wrong, 403))
    for token, status in attempts:
        res = call(web, method, url, token, body)
        assert res.status_code == status, (token, res.text)
        assert res.text.count("\n") == 1
    assert snapshot(r) == before
    refused = r.hgetall(keyspace.GLOBAL_STATS)
    assert int(refused.get("admin_unauthenticated", 0)) == 1
    assert int(refused.get("admin_bad_token", 0)) == 3


def test_tokens_are_stored_hashed(r, tok):
    stored = r.hgetall(keyspace.ADMIN_TOKENS)
    assert len(stored) == 3
    for text in tok.values():
        secret = text[len("trk_123456789abc_"):]   # the secret itself may contain "_"
        assert all(text not in raw and secret not in raw for raw in stored.values())
    assert tokens.verify(r, tok[P]).scope == P


# -- projects -------------------------------------------------------------------------------

def test_global_admin_creates_project_project_admin_sees_only_theirs(web, tok, admin):
    res = call(web, "POST", "/api/admin/projects", tok["global"],
               {"project": "fresh", "settings": {"title": "Fresh", "rate_limit": "60"}})
    assert ok(res) == {"created": "fresh"}
    assert admin.show_project("fresh")["settings"]["rate_limit"] == "60"
    assert call(web, "POST", "/api/admin/projects", tok["global"],
                {"project": "fresh"}).status_code == 409
    assert call(web, "POST", "/api/admin/projects", tok["global"],
                {"project": "Bad Name"}).status_code == 400
    assert ok(call(web, "GET", "/api/admin/projects", tok[P])) == {"projects": [P]}
    assert set(ok(call(web, "GET", "/api/admin/projects", tok["global"]))["projects"]) == \
        {P, OTHER, "fresh"}


def test_settings_pause_resume_and_audit(web, tok, engine, r):
    assert ok(call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P],
                   {"min_version": "20240101.01", "title": "T"}))["settings_age"] >= 2
    assert call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P],
                {"rate_limit": "-5"}).status_code == 400
    assert call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P],
                {"nonsense": "1"}).status_code == 400
    ok(call(web, "POST", f"/api/admin/projects/{P}/pause", tok[P]))
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    ok(call(web, "POST", f"/api/admin/projects/{P}/resume", tok[P]))
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert [e["action"] for e in entries] == ["project.resume", "project.pause", "project.settings"]
    token_id = tok[P].split("_")[1]
    assert all(e["actor"] == token_id for e in entries)
    assert entries[2]["detail"]["settings"]["min_version"] == "20240101.01"
    # The global log has them too; a project admin cannot read it.
    assert len(ok(call(web, "GET", "/api/admin/audit", tok["global"]))["entries"]) == 3
    assert call(web, "GET", "/api/admin/audit", tok[P]).status_code == 403


def test_audit_pages(web, tok):
    for _ in range(5):
        ok(call(web, "POST", f"/api/admin/projects/{P}/pause", tok[P]))
    first = ok(call(web, "GET", f"/api/admin/projects/{P}/audit?count=3", tok[P]))
    second = ok(call(web, "GET", f"/api/admin/projects/{P}/audit?count=3&before={first['next']}",
                     tok[P]))
    ids = [e["id"] for e in first["entries"] + second["entries"]]
    assert len(ids) == 5 == len(set(ids)) and second["next"] is None


def test_delete_project_removes_its_keys(web, tok, engine, r, admin):
    engine.claim(P, "alice", "10.0.0.1", 3)
    list(admin.add_items(P, ["mine"], queue="downloader:bob"))
    assert call(web, "DELETE", f"/api/admin/projects/{P}", tok[P]).status_code == 403
    ok(call(web, "DELETE", f"/api/admin/projects/{P}", tok["global"]))
    # Time-bucketed counters are deleted over the spans the wall clock says they can live; the
    # engine here runs on a 2023 clock, so its buckets are only left to their expiry.
    left = [k for k in r.scan_iter(f"{{{P}}}*") if not k.endswith(":audit")]
    assert left and all(":minute:" in k or ":uniq:" in k or ":hour:" in k for k in left)
    assert all(r.ttl(k) > 0 for k in left)
    assert P not in admin.projects() and engine.claim(P, "alice", "10.0.0.1", 1)[0] == -1
    assert call(web, "GET", f"/api/admin/projects/{P}", tok["global"]).status_code == 404


# -- queues ---------------------------------------------------------------------------------

def test_add_items_as_json_and_as_uploaded_text(web, tok, r):
    res = call(web, "POST", f"/api/admin/projects/{P}/queues/todo/items", tok[P],
               {"items": ["new1", "new2", "item001"]})
    assert ok(res) == {"added": 2, "duplicates": 1}
    upload = "\n".join(f"up{n}" for n in range(7000)).encode() + b"\n\nnew1\n"
    res = call(web, "POST", f"/api/admin/projects/{P}/queues/secondary/items", tok[P],
               raw=upload, content_type="text/plain")
    assert ok(res) == {"added": 7000, "duplicates": 1}
    assert r.scard(K.secondary) == 7000
    assert call(web, "POST", f"/api/admin/projects/{P}/queues/nowhere/items", tok[P],
                {"items": ["x"]}).status_code == 400
    assert call(web, "POST", f"/api/admin/projects/{P}/queues/todo/items", tok[P],
                {"items": "x"}).status_code == 400
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert entries[0]["detail"] == {"added": 7000, "duplicates": 1, "queue": "secondary"}


def test_count_sample_clear(web, tok, r):
    assert ok(call(web, "GET", f"/api/admin/projects/{P}/queues/todo", tok[P]))["count"] == 50
    items = ok(call(web, "GET", f"/api/admin/projects/{P}/queues/todo/sample?count=5", tok[P]))["items"]
    assert len(items) == 5 and all(r.sismember(K.todo, i) for i in items)
    assert ok(call(web, "GET", f"/api/admin/projects/{P}/queues", tok[P]))["todo_total"] == 50
    assert ok(call(web, "POST", f"/api/admin/projects/{P}/queues/todo/clear", tok[P])) == {"dropped": 50}
    assert r.scard(K.todo) == 0


def test_move_with_pattern_a_page_at_a_time(web, tok, r):
    moved, cursor = 0, 0
    while True:
        res = ok(call(web, "POST", f"/api/admin/projects/{P}/queues/todo/move", tok[P],
                      {"to": "downloader:bob", "pattern": "item01*", "cursor": cursor, "limit": 10}))
        moved += res["moved"]
        cursor = res["cursor"]
        if cursor == 0:
            break
    assert moved == 10 and r.smembers(K.downloader_queue("bob")) == {f"item01{n}" for n in range(10)}
    assert r.scard(K.todo) == 40 and r.sismember(K.downloader_queues, "bob")
    assert call(web, "POST", f"/api/admin/projects/{P}/queues/todo/move", tok[P],
                {"to": "todo"}).status_code == 400


# -- claims ---------------------------------------------------------------------------------

def test_list_claims_paginated(web, tok, engine):
    engine.claim(P, "alice", "10.0.0.1", 12)
    seen, cursor = {}, 0
    while True:
        page = ok(call(web, "GET", f"/api/admin/projects/{P}/claims?count=5&cursor={cursor}", tok[P]))
        for row in page["claims"]:
            seen[row["item"]] = row
        cursor = page["cursor"]
        if cursor == 0:
            break
    assert len(seen) == 12
    row = next(iter(seen.values()))
    assert row["downloader"] == "alice" and row["ip"] == "10.0.0.1" and row["times_claimed"] == 1
    assert row["claimed_at_ms"] == int(engine.clock() * 1000)


def test_release_by_downloader_age_and_pattern(web, tok, engine, r):
    alice = engine.claim(P, "alice", "10.0.0.1", 5)[1]
    bob = engine.claim(P, "bob", "10.0.0.2", 5)[1]
    res = ok(call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P],
                  {"downloader": "alice"}))
    assert res == {"released": 5, "cursor": 0}
    assert all(r.sismember(K.todo, i) for i in alice) and r.zcard(K.out) == 5
    # By age: the engine's clock is in 2023, so bob's claims are old by the wall clock.
    res = ok(call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P],
                  {"older_than_s": 3600, "limit": 2}))
    assert res == {"released": 2, "cursor": 1}
    carol = engine.claim(P, "carol", "10.0.0.3", 3)[1]
    res = ok(call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P],
                  {"pattern": carol[0]}))
    assert res["released"] == 1 and r.sismember(K.todo, carol[0])
    assert r.zcard(K.out) == 3 + 2
    assert call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P],
                {"downloader": "a", "pattern": "*"}).status_code == 400
    assert call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P],
                {"older_than_s": "soon"}).status_code == 400
    assert set(bob) >= set(r.zrange(K.out, 0, -1)) - set(carol)


# -- blocks, targets, tokens, HQ ------------------------------------------------------------

def test_blocks_project_and_global(web, tok, engine, r):
    ok(call(web, "POST", f"/api/admin/projects/{P}/blocks", tok[P], {"entry": "name:mallory"}))
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 403
    ok(call(web, "POST", f"/api/admin/projects/{P}/blocks", tok[P],
            {"entry": "name:mallory", "remove": True}))
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 200
    assert call(web, "POST", f"/api/admin/projects/{P}/blocks", tok[P],
                {"entry": "mallory"}).status_code == 400
    ok(call(web, "POST", "/api/admin/blocks", tok["global"], {"entry": "ip:10.9.9.9"}))
    assert r.sismember(ProjectKeys(OTHER).blocked, "ip:10.9.9.9")


def test_upload_targets(web, tok, engine):
    ok(call(web, "POST", f"/api/admin/projects/{P}/upload-targets", tok[P],
            {"url": "rsync://up.example/m/:downloader/"}))
    assert engine.upload_target(P, "alice") == "rsync://up.example/m/alice/"
    assert call(web, "POST", f"/api/admin/projects/{P}/upload-targets", tok[P],
                {"url": "ftp://nope"}).status_code == 400
    ok(call(web, "POST", f"/api/admin/projects/{P}/upload-targets", tok[P],
            {"url": "rsync://up.example/m/:downloader/", "state": "remove"}))
    assert engine.upload_target(P, "alice") is None


def test_token_create_list_revoke(web, tok, r):
    res = ok(call(web, "POST", "/api/admin/tokens", tok["global"], {"scope": P, "note": "ci"}))
    new = res["token"]
    assert ok(call(web, "GET", f"/api/admin/projects/{P}/queues", new))["todo_total"] == 50
    listed = ok(call(web, "GET", "/api/admin/tokens", tok["global"]))["tokens"]
    assert {t["token_id"] for t in listed} >= {res["token_id"]}
    assert new[len("trk_123456789abc_"):] not in json.dumps(listed)
    assert all("token" not in t for t in listed)
    assert call(web, "POST", "/api/admin/tokens", tok["global"], {"scope": "No Way"}).status_code == 400
    ok(call(web, "DELETE", f"/api/admin/tokens/{res['token_id']}", tok["global"]))
    assert call(web, "GET", f"/api/admin/projects/{P}/queues", new).status_code == 401
    assert call(web, "DELETE", f"/api/admin/tokens/{res['token_id']}",
                tok["global"]).status_code == 404


def test_bad_json_is_400_and_changes_nothing(web, tok, r):
    before = snapshot(r)
    for raw in (b"{", b"[1]", b'"x"'):
        res = call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P], raw=raw)
        assert res.status_code == 400
    assert snapshot(r) == before


def test_projects_json_from_settings_and_hq_fields(web, tok, admin):
    admin.set_settings(P, {"title": "Proj", "repository": "https://git.example/proj-grab.git",
                           "lat_lng": "51,9", "deadline": "2013-04-30T23:59:59Z"})
    admin.set_settings(OTHER, {"warrior_listed": "0"})
    ok(call(web, "POST", "/api/admin/hq", tok["global"],
            {"auto_project": P, "broadcast_message": "<p>hi</p>"}))
    assert call(web, "POST", "/api/admin/hq", tok["global"], {"nope": "1"}).status_code == 400
    doc = web.simulate_get("/projects.json").json
    assert doc["warrior"] == {"seesaw_version": "0.8.5"}
    assert doc["auto_project"] == P and doc["broadcast_message"] == "<p>hi</p>"
    assert [p["name"] for p in doc["projects"]] == [P]
    entry = doc["projects"][0]
    assert entry["title"] == "Proj" and entry["lat_lng"] == [51.0, 9.0]
    assert entry["repository"] == "https://git.example/proj-grab.git"
    assert entry["leaderboard"].endswith(f"/{P}/") and entry["deadline"] == "2013-04-30T23:59:59Z"
    assert call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P],
                {"lat_lng": "500,1"}).status_code == 400


def test_warrior_register_update_and_registry(web, tok, r):
    res = web.simulate_post("/api/register.json", body=orjson.dumps({"warrior": {"version": "3.2"}}),
                            headers={"Content-Type": "application/json"})
    warrior_id = res.json["warrior_id"]
    assert res.status_code == 200 and len(warrior_id) == 32
    res = web.simulate_post("/api/update.json", body=orjson.dumps({"warrior_id": warrior_id}),
                            headers={"Content-Type": "application/json"})
    assert res.status_code == 200 and "projects" in res.json
    # An unknown id still gets the document, and is not added.
    res = web.simulate_post("/api/update.json", body=orjson.dumps({"warrior_id": "ghost"}),
                            headers={"Content-Type": "application/json"})
    assert res.status_code == 200 and r.zscore(keyspace.WARRIORS_SEEN, "ghost") is None
    assert web.simulate_post("/api/register.json", body=b"{",
                             headers={"Content-Type": "application/json"}).status_code == 400
    listed = ok(call(web, "GET", "/api/admin/warriors", tok["global"]))
    assert listed["active_last_hour"] == 1
    assert web.simulate_get(f"/{P}/stats.json").json["warriors_active"] == 1
    assert listed["warriors"][0]["warrior_id"] == warrior_id
    assert listed["warriors"][0]["warrior"] == {"version": "3.2"}


def test_stale_warriors_are_forgotten(r):
    from tracker_core import hq
    old = hq.register(r, {"version": "1"}, "10.0.0.1")
    r.zadd(keyspace.WARRIORS_SEEN, {old: 1})           # silent since 1970
    fresh = hq.register(r, {"version": "2"}, "10.0.0.2")
    assert r.zscore(keyspace.WARRIORS_SEEN, old) is None and not r.hexists(keyspace.WARRIORS, old)
    assert hq.heartbeat(r, fresh) and not hq.heartbeat(r, old)


# -- CLI --------------------------------------------------------------------------------------

def test_cli_token_create_and_revoke(redis_url, projects, r, web):
    env_cmd = [str(TRACKER_BIN), "--redis-url", redis_url, "admin", "token"]
    out = subprocess.run(env_cmd + ["create", "--scope", P, "--note", "cli"], check=True,
                         capture_output=True, text=True).stdout
    created = json.loads(out)
    assert created["scope"] == P and tokens.verify(r, created["token"]).note == "cli"
    assert call(web, "GET", f"/api/admin/projects/{P}", created["token"]).status_code == 200
    subprocess.run(env_cmd + ["revoke", created["token_id"]], check=True, capture_output=True)
    assert tokens.verify(r, created["token"]) is None
    failed = subprocess.run(env_cmd + ["revoke", created["token_id"]], capture_output=True, text=True)
    assert failed.returncode != 0 and "no token" in failed.stderr


def test_cli_offers_the_same_operations(redis_url, projects, r, engine):
    from click.testing import CliRunner
    from tracker_api.cli import main

    def cli(*args):
        res = CliRunner().invoke(main, ["--redis-url", redis_url, *args])
        assert res.exit_code == 0, res.output
        return json.loads(res.output.strip().splitlines()[-1])

    assert cli("queue", "count", P, "todo") == 50
    assert len(cli("queue", "sample", P, "todo", "--count", "3")) == 3
    assert cli("queue", "move", P, "todo", "secondary", "--pattern", "item00*") == {"moved": 10}
    assert r.scard(K.secondary) == 10
    engine.claim(P, "alice", "10.0.0.1", 4)
    page = cli("claims", "list", P, "--count", "100")
    assert {row["downloader"] for row in page["claims"]} == {"alice"} and len(page["claims"]) == 4
    assert cli("claims", "release", P, "--downloader", "alice") == {"released": 4}
    cli("project", "pause", P)
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    cli("project", "resume", P)
    assert cli("queue", "clear", P, "secondary", "--yes") == {"dropped": 10}
    refused = CliRunner().invoke(main, ["--redis-url", redis_url, "queue", "clear", P, "todo"])
    assert refused.exit_code == 2 and r.scard(K.todo) == 40
    cli("project", "delete", OTHER, "--yes")
    assert not r.exists(ProjectKeys(OTHER).settings)
    actions = [f["action"] for _, f in r.xrevrange(keyspace.AUDIT)]
    assert actions[:6] == ["project.delete", "queue.clear", "project.resume", "project.pause",
                           "claims.release", "queue.move"]
    assert {f["actor"] for _, f in r.xrevrange(keyspace.AUDIT)} == {"cli"}
