"""The admin API: tokens (hashed), global and project admins, audit log, every operation; HQ."""

import json
import subprocess

import orjson
import pytest

from support.paths import TRACKER_BIN
from support.state import snapshot
from tracker_api.admin.api_routes import ADMIN_ROUTES
from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P, OTHER = "proj", "other"
K = ProjectKeys(P)


@pytest.fixture
def projects(admin):
    project_verbs.create(admin, P)
    project_verbs.create(admin, OTHER)
    item_verbs.add(admin, P, [f"item{n:03d}" for n in range(50)])
    return P


# What the projects fixture's own verbs record in P's audit log (newest first), under "cli".
SETUP_ACTIONS = ["items.add", "project.create"]


@pytest.fixture
def tok(admin, projects):
    """Tokens: a global admin's, one for P and one for OTHER."""
    return {
        "global": tokens.create(admin.conn, "*", "ops")[0],
        P: tokens.create(admin.conn, P, "proj admin")[0],
        OTHER: tokens.create(admin.conn, OTHER)[0],
    }


def call(web, method, path, token=None, body=None, raw=None, content_type="application/json", **kw):
    headers = {"Content-Type": content_type}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    return web.simulate_request(method, path, headers=headers, body=data, **kw)


def upload_text(web, token, text: bytes, queue="secondary"):
    """TEXT, names one a line, uploaded as a file to QUEUE of P."""
    path = f"/api/admin/projects/{P}/queues/{queue}/items"
    return call(web, "POST", path, token, raw=text, content_type="text/plain")


def ok(res):
    assert res.status_code == 200, res.text
    return res.json


# -- authentication: every route ------------------------------------------------------------


def route_path(path, project=P, **given):
    values = dict(
        project=project,
        queue="todo",
        token_id="0123456789ab",
        name="users",
        secret_id="0123456789ab",
        shard="s1",
        hook_id="0123456789ab",
    )
    return path.format(**dict(values, **given))


BODIES = {
    "create_project": {"project": "newproj"},
    "grow_project": {"shards": 2},
    "set_settings": {"title": "x"},
    "move": {"to": "secondary"},
    "release": {"older_than_s": 0},
    "block": {"entry": "name:mallory"},
    "upload_target": {"url": "rsync://h/m/"},
    "create_token": {"scope": "*"},
    "set_hq": {"broadcast_message": "hi"},
    "add_items": {"items": ["zzz"]},
    "add_limit": {"name": "users", "pattern": "type:user", "rate": "10/m"},
    "map_shard": {"queue": "secondary"},
    "requeue_dead": {"all": True},
    "redo_items": {"pattern": "*"},
    "add_global": {"url": "https://example.com/hook"},
    "add_project": {"url": "https://example.com/hook"},
}


@pytest.mark.parametrize(
    "method,path,needs,handler", ADMIN_ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ADMIN_ROUTES]
)
def test_every_admin_route_refuses_missing_bad_and_wrong_tokens(web, r, tok, method, path, needs, handler):
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
        secret = text[len("trk_123456789abc_") :]  # the secret itself may contain "_"
        assert all(text not in raw and secret not in raw for raw in stored.values())
    assert tokens.verify(r, tok[P]).scope == P


# -- projects -------------------------------------------------------------------------------


def test_global_admin_creates_project_project_admin_sees_only_theirs(web, tok, admin):
    res = call(
        web,
        "POST",
        "/api/admin/projects",
        tok["global"],
        {"project": "fresh", "settings": {"title": "Fresh", "rate_limit": "60"}},
    )
    assert ok(res) == {"created": "fresh", "shards": 1}
    assert project_verbs.show(admin, "fresh")["settings"]["rate_limit"] == "60"
    assert call(web, "POST", "/api/admin/projects", tok["global"], {"project": "fresh"}).status_code == 409
    assert call(web, "POST", "/api/admin/projects", tok["global"], {"project": "Bad Name"}).status_code == 400
    assert ok(call(web, "GET", "/api/admin/projects", tok[P])) == {"projects": [P]}
    assert set(ok(call(web, "GET", "/api/admin/projects", tok["global"]))["projects"]) == {P, OTHER, "fresh"}


def test_settings_pause_resume_and_audit(web, tok, engine, r):
    assert (
        ok(
            call(
                web,
                "POST",
                f"/api/admin/projects/{P}/settings",
                tok[P],
                {"min_version": "20240101.01", "title": "T"},
            )
        )["settings_age"]
        >= 2
    )
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P], {"rate_limit": "-5"}).status_code
        == 400
    )
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P], {"nonsense": "1"}).status_code == 400
    )
    ok(call(web, "POST", f"/api/admin/projects/{P}/pause", tok[P]))
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    ok(call(web, "POST", f"/api/admin/projects/{P}/resume", tok[P]))
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert [e["action"] for e in entries] == [
        "project.resume",
        "project.pause",
        "project.settings",
        *SETUP_ACTIONS,
    ]
    token_id = tok[P].split("_")[1]
    assert all(e["actor"] == token_id for e in entries[:3])
    assert {e["actor"] for e in entries[3:]} == {"cli"}
    assert entries[2]["detail"]["settings"]["min_version"] == "20240101.01"
    # The global log has them too (and the creation of OTHER); a project admin cannot read it.
    assert len(ok(call(web, "GET", "/api/admin/audit", tok["global"]))["entries"]) == 3 + 3
    assert call(web, "GET", "/api/admin/audit", tok[P]).status_code == 403


def test_audit_pages(web, tok):
    for _ in range(5):
        ok(call(web, "POST", f"/api/admin/projects/{P}/pause", tok[P]))
    # Five pauses and the two records of the fixture's setup: pages of 4 and 3.
    first = ok(call(web, "GET", f"/api/admin/projects/{P}/audit?count=4", tok[P]))
    second = ok(call(web, "GET", f"/api/admin/projects/{P}/audit?count=4&before={first['next']}", tok[P]))
    ids = [e["id"] for e in first["entries"] + second["entries"]]
    assert len(ids) == 5 + len(SETUP_ACTIONS) == len(set(ids)) and second["next"] is None


def test_delete_project_removes_its_keys(web, tok, engine, r, admin):
    engine.claim(P, "alice", "10.0.0.1", 3)
    item_verbs.add(admin, P, ["mine"], queue="downloader:bob")
    assert call(web, "DELETE", f"/api/admin/projects/{P}", tok[P]).status_code == 403
    ok(call(web, "DELETE", f"/api/admin/projects/{P}", tok["global"]))
    # Time-bucketed counters are deleted over the spans the wall clock says they can live; the
    # engine here runs on a 2023 clock, so its buckets are only left to their expiry.
    left = [k for k in r.scan_iter(f"{{{P}}}*") if not k.endswith(":audit")]
    assert left and all(":minute:" in k or ":uniq:" in k or ":hour:" in k for k in left)
    assert all(r.ttl(k) > 0 for k in left)
    assert P not in project_verbs.list_projects(admin) and engine.claim(P, "alice", "10.0.0.1", 1)[0] == -1
    assert call(web, "GET", f"/api/admin/projects/{P}", tok["global"]).status_code == 404


# -- queues ---------------------------------------------------------------------------------


def test_add_items_as_json_and_as_uploaded_text(web, tok, r):
    res = call(
        web,
        "POST",
        f"/api/admin/projects/{P}/queues/todo/items",
        tok[P],
        {"items": ["new1", "new2", "item001"]},
    )
    assert ok(res) == {"added": 2, "duplicates": 1}
    upload = "\n".join(f"up{n}" for n in range(7000)).encode() + b"\n\nnew1\n"
    res = upload_text(web, tok[P], upload)
    assert ok(res) == {"added": 7000, "duplicates": 1}
    assert r.scard(K.secondary) == 7000
    assert (
        call(
            web, "POST", f"/api/admin/projects/{P}/queues/nowhere/items", tok[P], {"items": ["x"]}
        ).status_code
        == 400
    )
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/queues/todo/items", tok[P], {"items": "x"}).status_code
        == 400
    )
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert entries[0]["detail"] == {"added": 7000, "duplicates": 1, "queue": "secondary"}


def test_uploaded_text_splits_only_at_line_ends(web, tok, r):
    # URL names may hold characters str.splitlines() breaks at (NEL, LINE SEPARATOR, FF, VT);
    # only \n (and \r\n) ends a name, as in `tracker items add`.
    names = ["https://example.com/a\u2028b?q=1#x", "https://example.com/\x85/c d", "https://x/\x0cy\x0bz"]
    upload = ("\r\n".join(names) + "\n").encode()
    res = upload_text(web, tok[P], upload)
    assert ok(res) == {"added": 3, "duplicates": 0}
    assert r.smembers(K.secondary) == set(names)


def test_listings_answer_for_names_that_are_not_utf8(web, tok, r, redis_url):
    # Names queued before intake refused them (old data): a listing shows their bad bytes
    # escaped rather than failing with a 500.
    import redis as redis_py

    raw = redis_py.Redis.from_url(redis_url)
    raw.hset(K.dead, b"https://example.com/\xff\xfe?q", b'{"reason": "old"}')
    raw.sadd(K.secondary, b"bad\xc3(")
    dead = ok(call(web, "GET", f"/api/admin/projects/{P}/dead", tok[P]))
    assert [d["item"] for d in dead["dead"]] == ["https://example.com/\\xff\\xfe?q"]
    sample = ok(call(web, "GET", f"/api/admin/projects/{P}/queues/secondary/sample", tok[P]))
    assert sample["items"] == ["bad\\xc3("]


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
        res = ok(
            call(
                web,
                "POST",
                f"/api/admin/projects/{P}/queues/todo/move",
                tok[P],
                {"to": "downloader:bob", "pattern": "item01*", "cursor": cursor, "limit": 10},
            )
        )
        moved += res["moved"]
        cursor = res["cursor"]
        if cursor == 0:
            break
    assert moved == 10 and r.smembers(K.downloader_queue("bob")) == {f"item01{n}" for n in range(10)}
    assert r.scard(K.todo) == 40 and r.sismember(K.downloader_queues, "bob")
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/queues/todo/move", tok[P], {"to": "todo"}).status_code
        == 400
    )


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
    res = ok(call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P], {"downloader": "alice"}))
    assert res == {"released": 5, "cursor": 0}
    assert all(r.sismember(K.todo, i) for i in alice) and r.zcard(K.out) == 5
    # By age: the engine's clock is in 2023, so bob's claims are old by the wall clock.
    res = ok(
        call(
            web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P], {"older_than_s": 3600, "limit": 2}
        )
    )
    assert res == {"released": 2, "cursor": 1}
    carol = engine.claim(P, "carol", "10.0.0.3", 3)[1]
    res = ok(call(web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P], {"pattern": carol[0]}))
    assert res["released"] == 1 and r.sismember(K.todo, carol[0])
    assert r.zcard(K.out) == 3 + 2
    assert (
        call(
            web,
            "POST",
            f"/api/admin/projects/{P}/claims/release",
            tok[P],
            {"downloader": "a", "pattern": "*"},
        ).status_code
        == 400
    )
    assert (
        call(
            web, "POST", f"/api/admin/projects/{P}/claims/release", tok[P], {"older_than_s": "soon"}
        ).status_code
        == 400
    )
    assert set(bob) >= set(r.zrange(K.out, 0, -1)) - set(carol)


# -- blocks, targets, tokens, HQ ------------------------------------------------------------


def test_blocks_project_and_global(web, tok, engine, r):
    ok(call(web, "POST", f"/api/admin/projects/{P}/blocks", tok[P], {"entry": "name:mallory"}))
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 403
    ok(
        call(
            web, "POST", f"/api/admin/projects/{P}/blocks", tok[P], {"entry": "name:mallory", "remove": True}
        )
    )
    assert engine.claim(P, "mallory", "10.0.0.1", 1)[0] == 200
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/blocks", tok[P], {"entry": "mallory"}).status_code == 400
    )
    ok(call(web, "POST", "/api/admin/blocks", tok["global"], {"entry": "ip:10.9.9.9"}))
    assert r.sismember(ProjectKeys(OTHER).blocked_global, "ip:10.9.9.9")


def test_upload_targets(web, tok, engine):
    def set_target(body):
        return call(web, "POST", f"/api/admin/projects/{P}/upload-targets", tok[P], body)

    ok(set_target({"url": "rsync://up.example/m/:downloader/"}))
    assert engine.upload_target(P, "alice") == "rsync://up.example/m/alice/"
    assert set_target({"url": "ftp://nope"}).status_code == 400
    ok(set_target({"url": "rsync://up.example/m/:downloader/", "state": "remove"}))
    assert engine.upload_target(P, "alice") is None


def test_token_create_list_revoke(web, tok, r):
    res = ok(call(web, "POST", "/api/admin/tokens", tok["global"], {"scope": P, "note": "ci"}))
    new = res["token"]
    assert ok(call(web, "GET", f"/api/admin/projects/{P}/queues", new))["todo_total"] == 50
    listed = ok(call(web, "GET", "/api/admin/tokens", tok["global"]))["tokens"]
    assert {t["token_id"] for t in listed} >= {res["token_id"]}
    assert new[len("trk_123456789abc_") :] not in json.dumps(listed)
    assert all("token" not in t for t in listed)
    assert call(web, "POST", "/api/admin/tokens", tok["global"], {"scope": "No Way"}).status_code == 400
    ok(call(web, "DELETE", f"/api/admin/tokens/{res['token_id']}", tok["global"]))
    assert call(web, "GET", f"/api/admin/projects/{P}/queues", new).status_code == 401
    assert call(web, "DELETE", f"/api/admin/tokens/{res['token_id']}", tok["global"]).status_code == 404


def test_projects_json_from_settings_and_hq_fields(web, tok, admin):
    project_verbs.set_settings(
        admin,
        P,
        {
            "title": "Proj",
            "repository": "https://git.example/proj-grab.git",
            "lat_lng": "51,9",
            "deadline": "2013-04-30T23:59:59Z",
        },
    )
    project_verbs.set_settings(admin, OTHER, {"warrior_listed": "0"})
    ok(
        call(
            web, "POST", "/api/admin/hq", tok["global"], {"auto_project": P, "broadcast_message": "<p>hi</p>"}
        )
    )
    assert call(web, "POST", "/api/admin/hq", tok["global"], {"nope": "1"}).status_code == 400
    doc = web.simulate_get("/projects.json").json
    assert doc["warrior"] == {"seesaw_version": "0.8.5"}
    assert doc["auto_project"] == P and doc["broadcast_message"] == "<p>hi</p>"
    assert [p["name"] for p in doc["projects"]] == [P]
    entry = doc["projects"][0]
    assert entry["title"] == "Proj" and entry["lat_lng"] == [51.0, 9.0]
    assert entry["repository"] == "https://git.example/proj-grab.git"
    assert entry["leaderboard"].endswith(f"/{P}/") and entry["deadline"] == "2013-04-30T23:59:59Z"
    assert (
        call(web, "POST", f"/api/admin/projects/{P}/settings", tok[P], {"lat_lng": "500,1"}).status_code
        == 400
    )


def test_warrior_register_update_and_registry(web, tok, r):
    res = web.simulate_post(
        "/api/register.json",
        body=orjson.dumps({"warrior": {"version": "3.2"}}),
        headers={"Content-Type": "application/json"},
    )
    warrior_id = res.json["warrior_id"]
    assert res.status_code == 200 and len(warrior_id) == 32
    res = web.simulate_post(
        "/api/update.json",
        body=orjson.dumps({"warrior_id": warrior_id}),
        headers={"Content-Type": "application/json"},
    )
    assert res.status_code == 200 and "projects" in res.json
    # An unknown id still gets the document, and is not added.
    res = web.simulate_post(
        "/api/update.json",
        body=orjson.dumps({"warrior_id": "ghost"}),
        headers={"Content-Type": "application/json"},
    )
    assert res.status_code == 200 and r.zscore(keyspace.WARRIORS_SEEN, "ghost") is None
    assert (
        web.simulate_post(
            "/api/register.json", body=b"{", headers={"Content-Type": "application/json"}
        ).status_code
        == 400
    )
    listed = ok(call(web, "GET", "/api/admin/warriors", tok["global"]))
    assert listed["active_last_hour"] == 1
    assert web.simulate_get(f"/{P}/stats.json").json["warriors_active"] == 1
    assert listed["warriors"][0]["warrior_id"] == warrior_id
    assert listed["warriors"][0]["warrior"] == {"version": "3.2"}


def test_stale_warriors_are_forgotten(r):
    from tracker_core.warriors import hq

    old = hq.register(r, {"version": "1"}, "10.0.0.1")
    r.zadd(keyspace.WARRIORS_SEEN, {old: 1})  # silent since 1970
    fresh = hq.register(r, {"version": "2"}, "10.0.0.2")
    assert r.zscore(keyspace.WARRIORS_SEEN, old) is None and not r.hexists(keyspace.WARRIORS, old)
    assert hq.heartbeat(r, fresh) and not hq.heartbeat(r, old)


# -- CLI --------------------------------------------------------------------------------------


def test_cli_token_create_and_revoke(redis_url, projects, r, web):
    env_cmd = [str(TRACKER_BIN), "--redis-url", redis_url, "admin", "token"]
    out = subprocess.run(
        env_cmd + ["create", "--scope", P, "--note", "cli", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    created = json.loads(out)
    assert created["scope"] == P and tokens.verify(r, created["token"]).note == "cli"
    assert call(web, "GET", f"/api/admin/projects/{P}", created["token"]).status_code == 200
    subprocess.run(env_cmd + ["revoke", created["token_id"]], check=True, capture_output=True)
    assert tokens.verify(r, created["token"]) is None
    failed = subprocess.run(env_cmd + ["revoke", created["token_id"]], capture_output=True, text=True)
    assert failed.returncode == 1 and "no token" in failed.stderr


def test_cli_offers_the_same_operations(redis_url, projects, r, engine):
    from click.testing import CliRunner

    from tracker_api.cli import main

    def cli(*args):
        res = CliRunner().invoke(main, ["--redis-url", redis_url, *args, "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.output.strip().splitlines()[-1])

    assert cli("queue", "count", P, "todo") == {"queue": "todo", "count": 50}
    assert len(cli("queue", "sample", P, "todo", "--count", "3")["items"]) == 3
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
    assert actions[:6] == [
        "project.delete",
        "queue.clear",
        "project.resume",
        "project.pause",
        "claims.release",
        "queue.move",
    ]
    assert {f["actor"] for _, f in r.xrevrange(keyspace.AUDIT)} == {"cli"}


# -- malformed input: every route answers 4xx with a reason, counts it, and changes nothing ----

BIG = 1 << 20  # admin_request.MAX_JSON_BYTES


def queries(*query_strings: str) -> list[dict]:
    """One malformed case a query string."""
    return [dict(query=query) for query in query_strings]


# handler name -> cases: dict(body=..., raw=..., query="a=1", path={param: value}, ctype=...)
MALFORMED = {
    "list_projects": [],
    "create_project": [
        dict(body={"project": 5}),
        dict(body={"project": None}),
        dict(body={}),
        dict(body={"project": "Bad Name"}),
        dict(body={"project": "x" * 100}),
        dict(body={"project": "fresh", "settings": []}),
        dict(body={"project": "fresh", "settings": "title=x"}),
        dict(body={"project": "fresh", "settings": {"title": None}}),
        dict(body={"project": "fresh", "settings": {"project": "other"}}),
        dict(body={"project": "fresh", "settings": {"rate_limit": "-1"}}),
        dict(body={"project": P}),
        dict(body={"project": "fresh", "shards": 0}),
        dict(body={"project": "fresh", "shards": 17}),
        dict(body={"project": "fresh", "shards": "3"}),
        dict(body={"project": "fresh", "shards": True}),
    ],
    "grow_project": [
        dict(body={}),
        dict(body={"shards": 1}),
        dict(body={"shards": 17}),
        dict(body={"shards": 2.0}),
        dict(body={"shards": 2, "more": 1}),
        dict(body={"shards": 2}, path={"project": "nope"}),
    ],
    "show_project": [dict(path={"project": "nope"}), dict(path={"project": "BAD"})],
    "delete_project": [dict(path={"project": "nope"}), dict(path={"project": "admin"})],
    "set_settings": [
        dict(body={}),
        dict(body={"title": None}),
        dict(body={"title": [1]}),
        dict(body={"title": {"a": 1}}),
        dict(body={"rate_limit": "lots"}),
        dict(body={"paused": "maybe"}),
        dict(body={"paused": None}),
        dict(body={"max_multi": 0}),
        dict(body={"lat_lng": "500,1"}),
        dict(body={"title": "x" * 201}),
        dict(body={"rate_limit": True}),
        dict(body={"title": "ok", "nonsense": "1"}),
        dict(body={"title": "x"}, path={"project": "nope"}),
    ],
    "pause": [dict(path={"project": "nope"})],
    "resume": [dict(path={"project": "nope"})],
    "queues": [dict(path={"project": "nope"})],
    "count_queue": [
        dict(path={"queue": "nowhere"}),
        dict(path={"queue": "downloader:x"}),
        dict(path={"project": "nope"}),
    ],
    "add_items": [
        dict(body={"items": "x"}),
        dict(body={"items": [1]}),
        dict(body={"items": [None]}),
        dict(body={"items": ["ok", "a\0b"]}),
        dict(body={"items": ["ok", "x" * 5000]}),
        dict(body={"items": ["x"]}, path={"queue": "nowhere"}),
        dict(body={"items": ["x"]}, path={"queue": "downloader:a b"}),
        dict(body={"items": ["x"]}, path={"project": "nope"}),
        dict(raw=b"fine\n" + b"y" * 5000 + b"\n", ctype="text/plain"),
        dict(raw=b"fine\nnul\0inside\n", ctype="text/plain"),
    ],
    "sample": [
        *queries("count=0", "count=abc", "count=1001", "count=1&count=2", "count=-1"),
        dict(path={"queue": "nowhere"}),
    ],
    "clear": [dict(path={"queue": "nowhere"}), dict(path={"project": "nope"})],
    "move": [
        dict(body={"to": 5}),
        dict(body={}),
        dict(body={"to": "todo"}),
        dict(body={"to": "nowhere"}),
        dict(body={"to": "secondary", "pattern": 5}),
        dict(body={"to": "secondary", "pattern": "x" * 1001}),
        dict(body={"to": "secondary", "cursor": -1}),
        dict(body={"to": "secondary", "cursor": "abc"}),
        dict(raw=b'{"to": "secondary", "cursor": 18446744073709551616}'),
        dict(body={"to": "secondary", "limit": 0}),
        dict(body={"to": "secondary", "limit": 1e308}),
        dict(body={"to": "secondary", "limit": True}),
    ],
    "claims": [
        *queries(
            "pattern=" + "x" * 1001, "cursor=-1", "cursor=99999999999999999999999", "count=0", "count=10001"
        ),
        dict(path={"project": "nope"}),
    ],
    "release": [
        dict(body={"pattern": 5}),
        dict(body={"pattern": ["a"]}),
        dict(body={"pattern": ""}),
        dict(body={"older_than_s": 1e308}),
        dict(body={"older_than_s": -1}),
        dict(body={"older_than_s": True}),
        dict(body={"older_than_s": "soon"}),
        dict(body={"downloader": 5}),
        dict(body={}),
        dict(body={"downloader": "a", "pattern": "*"}),
        dict(body={"older_than_s": 0, "cursor": -1}),
        dict(body={"older_than_s": 0, "limit": "x"}),
        dict(body={"older_than_s": 0}, path={"project": "nope"}),
    ],
    "block": [
        dict(body={"entry": "name:mallory", "remove": "no"}),
        dict(body={"entry": 5}),
        dict(body={"entry": "mallory"}),
        dict(body={"entry": "name:" + "x" * 300}),
        dict(body={}),
        dict(body={"entry": "name:mallory", "remove": 1}),
    ],
    "upload_target": [
        dict(body={"url": 5}),
        dict(body={"url": "ftp://x/"}),
        dict(body={"url": "rsync://h/m/", "state": "gone"}),
        dict(body={"url": "rsync://h/m/", "state": 1}),
        dict(body={}),
    ],
    "project_audit": queries(
        "before=zzz", "before=1-2-3", "before=99999999999999999999", "count=0", "count=x"
    ),
    "global_audit": [dict(query="before=zzz"), dict(query="before=-1"), dict(query="count=1001")],
    "list_tokens": [],
    "create_token": [
        dict(body={"scope": 5}),
        dict(body={"scope": "No Way"}),
        dict(body={}),
        dict(body={"scope": "*", "note": "x" * 201}),
        dict(body={"scope": "*", "note": 5}),
    ],
    "revoke_token": [dict(path={"token_id": "nothex"}), dict(path={"token_id": "0123456789ab"})],
    "warriors": [dict(query="offset=-1"), dict(query="count=0"), dict(query="count=5000")],
    "set_hq": [
        dict(body={"nope": "1"}),
        dict(body={"broadcast_message": None}),
        dict(body={"broadcast_message": 5}),
        dict(body={"auto_project": "Bad Name"}),
        dict(body={"broadcast_message": "x" * 6000}),
        dict(body={}),
    ],
    "list_limits": [dict(path={"project": "nope"})],
    "add_limit": [
        dict(body={"name": "users"}),
        dict(body={"name": 5, "pattern": "type:user", "rate": "1/s"}),
        dict(body={"name": "Bad Name", "pattern": "type:user", "rate": "1/s"}),
        dict(body={"name": "users", "pattern": "nokind", "rate": "1/s"}),
        dict(body={"name": "users", "pattern": "regex:(", "rate": "1/s"}),
        dict(body={"name": "users", "pattern": ["type:user"], "rate": "1/s"}),
        dict(body={"name": "users", "pattern": "type:user", "rate": "lots"}),
        dict(body={"name": "users", "pattern": "type:user", "rate": True}),
        dict(body={"name": "users", "pattern": "type:user", "rate": 0}),
        dict(body={"name": "users", "pattern": "type:user", "rate": 1e308}),
        dict(body={"name": "users", "pattern": "type:user", "rate": "1/s", "reclassify": "yes"}),
    ],
    "remove_limit": [
        dict(path={"name": "ghost"}),
        dict(path={"name": "BAD"}),
        dict(path={"project": "nope"}),
    ],
    "reclassify": [dict(path={"project": "nope"})],
    "list_backfeed_secrets": [dict(path={"project": "nope"})],
    "create_backfeed_secret": [dict(body={"secret": "mine"}), dict(path={"project": "nope"})],
    "revoke_backfeed_secret": [
        dict(path={"secret_id": "abc"}),
        dict(path={"secret_id": "zzzzzz"}),
        dict(path={"secret_id": "0123456789ab"}),
        dict(path={"secret_id": "0123456789abcd"}),
    ],
    "shard_map": [dict(query="cursor=x"), dict(query="count=0")],
    "map_shard": [
        dict(path={"shard": "bad*shard"}, body={"queue": "secondary"}),
        dict(body={"queue": "nowhere"}),
        dict(body={"queue": 5}),
        dict(body={}),
        dict(body={"queue": "downloader:x"}),
    ],
    "unmap_shard": [dict(path={"shard": "s9"}), dict(path={"shard": "bad*shard"})],
    "list_dead": [dict(query="count=0"), dict(query="cursor=x"), dict(path={"project": "nope"})],
    "requeue_dead": [
        dict(body={}),
        dict(body={"all": True, "items": ["a"]}),
        dict(body={"all": "yes"}),
        dict(body={"items": "a"}),
        dict(body={"items": [1]}),
        dict(body={"items": []}),
        dict(body={"items": ["deaditem"], "cursor": 5}),
        dict(body={"all": True, "queue": "nowhere"}),
        dict(body={"all": True, "cursor": -1}),
        dict(body={"items": ["deaditem"], "queue": "downloader:x"}),
    ],
    "list_segments": [dict(path={"project": "nope"})],
    "log_page": [
        *queries("kind=claims", "cursor=abc", "cursor=1-2-3", "since=soon", "limit=0", "limit=1001"),
        *queries("downloader=" + "x" * 65, "item=" + "x" * 4097, "item=a%00b"),
        dict(path={"project": "nope"}),
    ],
    "item_story": [
        dict(),  # no name
        *queries("name=", "name=" + "x" * 4097, "name=a%00b", "name=a&name=b"),
        dict(path={"project": "nope"}),
    ],
    "redo_items": [
        dict(body={}),
        dict(body={"items": ["a"], "pattern": "*"}),
        dict(body={"items": "a"}),
        dict(body={"items": []}),
        dict(body={"items": [1]}),
        dict(body={"items": ["a\0b"]}),
        dict(body={"items": ["a"], "cursor": 1}),
        dict(body={"pattern": "*", "limit": 10001}),
        dict(body={"pattern": "*", "queue": "nowhere"}),
        dict(body={"pattern": ""}),
        dict(body={"pattern": "*", "even_if_offloaded": "yes"}),
        dict(path={"project": "nope"}, body={"pattern": "*"}),
    ],
    "list_global": [],
    "add_global": [
        dict(body={"url": "ftp://example.com/"}),
        dict(body={"url": 5}),
        dict(body={}),
        dict(body={"url": "https://example.com/h", "events": ["project.vanished"]}),
        dict(body={"url": "https://example.com/h", "project": "nope"}),
        dict(body={"url": "https://example.com/" + "a" * 2000}),
    ],
    "remove_global": [dict(path={"hook_id": "nothex"}), dict()],
    "list_project": [dict(path={"project": "nope"})],
    "add_project": [
        dict(body={"url": "https://example.com/h", "events": ["clock.off"]}),
        dict(body={"url": "gopher://example.com/"}),
        dict(path={"project": "nope"}, body={"url": "https://example.com/h"}),
    ],
    "remove_project": [dict(path={"hook_id": "zz"}), dict(), dict(path={"project": "nope"})],
}


def _malformed_cases():
    cases = []
    for method, path, _, handler in ADMIN_ROUTES:
        name = handler.__name__
        generic = [dict(query="nonsense=1", body=BODIES.get(name))]
        if method != "GET":
            generic += [
                dict(raw=b"{"),
                dict(raw=b"[1]"),
                dict(raw=b'"x"'),
                dict(raw=b" " * (BIG + 1)),
                dict(body=dict(BODIES.get(name, {}), nonsense=1)),
            ]
        for n, case in enumerate(generic + MALFORMED[name]):
            cases.append(pytest.param(method, path, case, id=f"{method} {path} #{n}"))
    return cases


def test_every_route_has_malformed_cases():
    assert {h.__name__ for _, _, _, h in ADMIN_ROUTES} == set(MALFORMED)


def refusals(r):
    return sum(
        int(v)
        for key in (keyspace.GLOBAL_STATS, K.stats, ProjectKeys(OTHER).stats)
        for f, v in r.hgetall(key).items()
        if f.startswith("admin_")
    )


@pytest.fixture
def busy(tok, admin, r, engine):
    """Some of everything the routes touch: a limit, a secret, a mapped shard, a dead item, claims."""
    limit_verbs.add(admin, P, "pages", "prefix:page", "5/s")
    from tracker_core.access import backfeed_secrets

    backfeed_secrets.create(r, K)
    r.hset(K.backfeed_shard_map, "s1", "secondary")
    r.hset(K.dead, "deaditem", json.dumps({"times_claimed": 3}))
    engine.claim(P, "alice", "10.0.0.1", 3)
    return tok


@pytest.mark.parametrize("method,path,case", _malformed_cases())
def test_malformed_input_is_refused_counted_and_changes_nothing(web, r, busy, method, path, case):
    url = route_path(path, **case.get("path", {}))
    if case.get("query"):
        url += "?" + case["query"]
    before, counted = snapshot(r), refusals(r)
    res = call(
        web,
        method,
        url,
        busy["global"],
        case.get("body"),
        raw=case.get("raw"),
        content_type=case.get("ctype", "application/json"),
    )
    assert res.status_code in (400, 404, 409, 413), (res.status_code, res.text)
    assert res.text.count("\n") == 1 and len(res.text) <= 400, res.text
    assert refusals(r) == counted + 1
    assert snapshot(r) == before


# -- limits, backfeed secrets and shards, dead items, segments --------------------------------


def test_limits_list_add_remove_reclassify_and_audit(web, tok, r, admin):
    base = f"/api/admin/projects/{P}"
    res = ok(
        call(
            web,
            "POST",
            base + "/limits",
            tok[P],
            {"name": "early", "pattern": "regex:^item00", "rate": "2/m"},
        )
    )
    assert res["limit"] == "early" and res["settings_age"] > 0
    # Reclassified at once: the ten queued items it matches are held in its sub-queue.
    status = ok(call(web, "GET", base + "/queues", tok[P]))
    assert status["queues"]["limited"] == 10 and status["queues"]["todo"] == 40
    listed = ok(call(web, "GET", base + "/limits", tok[P]))["limits"]
    assert [(x["name"], x["pattern"], x["rate"]) for x in listed] == [("early", "regex:^item00", "2/m")]
    ok(
        call(
            web,
            "POST",
            base + "/limits",
            tok[P],
            {"name": "late", "pattern": "prefix:item04", "rate": 3, "reclassify": False},
        )
    )
    assert ok(call(web, "GET", base + "/queues", tok[P]))["queues"]["limited"] == 10
    assert ok(call(web, "POST", base + "/reclassify", tok[P])) == {"held": 10}
    assert ok(call(web, "DELETE", base + "/limits/late", tok[P]))["removed"] == "late"
    assert call(web, "DELETE", base + "/limits/late", tok[P]).status_code == 404
    assert [x["name"] for x in limit_verbs.list_limits(admin, P)] == ["early"]
    actions = [e["action"] for e in ok(call(web, "GET", base + "/audit", tok[P]))["entries"]]
    assert actions == ["limit.remove", "limit.reclassify", "limit.add", "limit.add", *SETUP_ACTIONS]


def test_backfeed_secrets_shown_once_listed_without_secret_revoked_by_id(web, tok, r, engine):
    base = f"/api/admin/projects/{P}/backfeed-secrets"
    created = ok(call(web, "POST", base, tok[P]))
    assert created["path"] == f"/backfeed/legacy/{P}-{created['secret']}"
    res = web.simulate_post(created["path"], body=b"fed1\0fed2\0")
    assert res.status_code == 200, res.text
    listed = ok(call(web, "GET", base, tok[P]))["secrets"]
    assert [s["id"] for s in listed] == [created["id"]]
    assert created["secret"] not in json.dumps(listed)
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert entries[0]["action"] == "backfeed_secret.create"
    assert created["secret"] not in json.dumps(entries)
    assert ok(call(web, "DELETE", f"{base}/{created['id']}", tok[P])) == {"revoked": created["id"]}
    assert web.simulate_post(created["path"], body=b"fed3\0").status_code == 403
    assert call(web, "DELETE", f"{base}/{created['id']}", tok[P]).status_code == 404


def test_secret_revoke_refuses_an_ambiguous_prefix(r, admin, projects):
    from tracker_core.access import backfeed_secrets

    first, second = "abcdef1" + "0" * 57, "abcdef2" + "0" * 57
    for hashed in (first, second):
        r.hset(K.backfeed_secrets, hashed, json.dumps({"id": hashed[:12], "created": 1}))
    with pytest.raises(backfeed_secrets.SecretError, match="ambiguous"):
        backfeed_secrets.revoke(r, K, "abcdef")
    assert r.hlen(K.backfeed_secrets) == 2
    with pytest.raises(backfeed_secrets.SecretError, match="bad secret id"):
        backfeed_secrets.revoke(r, K, "abcde")
    assert backfeed_secrets.revoke(r, K, "ABCDEF2") == second[:12]
    assert backfeed_secrets.revoke(r, K, first[:12]) == first[:12]
    assert backfeed_secrets.revoke(r, K, first[:12]) is None and r.hlen(K.backfeed_secrets) == 0


def test_shard_map_routes(web, tok, r):
    base = f"/api/admin/projects/{P}/backfeed-shards"
    r.hset(K.backfeed_shards, mapping={"s1": 4, "s2": 1})
    assert ok(call(web, "POST", base + "/s1", tok[P], {"queue": "secondary"})) == {
        "shard": "s1",
        "queue": "secondary",
    }
    ok(call(web, "POST", base + "/s3", tok[P], {"queue": "downloader:bob"}))
    shown = ok(call(web, "GET", base, tok[P]))
    assert shown == {
        "map": {"s1": "secondary", "s3": "downloader:bob"},
        "items": {"s1": 4, "s2": 1},
        "cursor": 0,
    }
    assert ok(call(web, "DELETE", base + "/s1", tok[P])) == {"shard": "s1", "queue": "backfeed"}
    assert r.hgetall(K.backfeed_shard_map) == {"s3": "downloader:bob"}
    actions = [e["action"] for e in ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]]
    assert actions == ["backfeed_shard.unmap", "backfeed_shard.map", "backfeed_shard.map", *SETUP_ACTIONS]


def test_dead_items_paginated_and_requeued(web, tok, r, admin):
    base = f"/api/admin/projects/{P}/dead"
    r.hset(K.dead, mapping={f"dead{n:02d}": json.dumps({"times_claimed": 4}) for n in range(30)})
    seen, cursor = {}, 0
    while True:
        page = ok(call(web, "GET", f"{base}?count=7&cursor={cursor}", tok[P]))
        seen.update((row["item"], row) for row in page["dead"])
        cursor = page["cursor"]
        if cursor == 0:
            break
    assert len(seen) == 30 and seen["dead07"]["times_claimed"] == 4
    assert ok(
        call(
            web, "POST", base + "/requeue", tok[P], {"items": ["dead00", "dead01", "nosuch"], "queue": "redo"}
        )
    ) == {"requeued": 2}
    assert r.smembers(K.redo) == {"dead00", "dead01"}
    requeued, cursor = 0, 0
    while True:
        page = ok(call(web, "POST", base + "/requeue", tok[P], {"all": True, "cursor": cursor, "limit": 5}))
        requeued, cursor = requeued + page["requeued"], page["cursor"]
        if cursor == 0:
            break
    assert requeued == 28 and r.hlen(K.dead) == 0 and r.scard(K.todo) == 50 + 28
    entries = ok(call(web, "GET", f"/api/admin/projects/{P}/audit", tok[P]))["entries"]
    assert [e["action"] for e in entries[-2:]] == SETUP_ACTIONS
    entries = entries[:-2]
    assert {e["action"] for e in entries} == {"dead.requeue"}
    assert sum(e["detail"]["requeued"] for e in entries) == 30


def test_segments_listed(web, tok, r):
    r.hset(K.segments, mapping={"1": 400, "2": 250, "#next": 3})
    r.hset(K.segment_queues, "2", "secondary")
    assert ok(call(web, "GET", f"/api/admin/projects/{P}/segments", tok[P])) == {
        "segments": {"1": {"items": 400, "source": "todo"}, "2": {"items": 250, "source": "secondary"}},
        "offloading": 0,
    }
