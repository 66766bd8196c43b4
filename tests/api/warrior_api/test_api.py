"""The warrior protocol over HTTP (falcon's test client), once per protocol implementation."""

import time

import orjson
import pytest

from support.projects import new_project
from support.state import snapshot
from tracker_core.admin import limit_verbs, project_verbs
from tracker_core.keyspace import GLOBAL_STATS, ProjectKeys

P = "proj"
K = ProjectKeys(P)


@pytest.fixture
def project(admin):
    return new_project(admin, P, [f"item{n}" for n in range(20)])


def post(client, path, body, **kw):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.simulate_post(path, body=raw, headers={"Content-Type": "application/json"}, **kw)


@pytest.mark.parametrize("path", ["/proj/multi=5//request", "/proj/multi=5/request"])
def test_multi_request_returns_nul_joined_names(client, project, path, r):
    res = post(client, path, {"downloader": "alice", "api_version": "2", "version": "1"})
    assert res.status_code == 200
    assert res.headers["content-type"].startswith("application/json")
    names = res.json["item_name"].split("\0")
    assert len(names) == 5 and set(names) <= {f"item{n}" for n in range(20)}
    assert r.zcard(K.out) == 5


def test_multi_is_capped_by_the_project(client, project, admin):
    project_verbs.set_settings(admin, P, {"max_multi": "3"})
    res = post(client, "/proj/multi=50//request", {"downloader": "alice", "api_version": "2"})
    assert len(res.json["item_name"].split("\0")) == 3


def test_legacy_request_gets_bare_name(client, project):
    res = post(client, "/proj/request", {"downloader": "alice"})
    assert res.status_code == 200 and res.text.startswith("item")
    assert res.headers["content-type"].startswith("text/plain") and "\0" not in res.text


def test_empty_queue_is_404_with_empty_body(client, admin):
    project_verbs.create(admin, "empty")
    res = post(client, "/empty/request", {"downloader": "alice", "api_version": "2"})
    assert res.status_code == 404 and res.content == b""


def test_rate_limited_is_429_with_empty_body(client, project, admin):
    project_verbs.set_settings(admin, P, {"rate_limit": "1", "rate_burst": "1"})
    assert post(client, "/proj/request", {"downloader": "alice", "api_version": "2"}).status_code == 200
    res = post(client, "/proj/request", {"downloader": "alice", "api_version": "2"})
    assert res.status_code == 429 and res.content == b""


def test_old_version_gets_455_and_claims_nothing(client, project, admin, r):
    project_verbs.set_settings(admin, P, {"min_version": "20240101.02"})
    for version in ("9", "20240101.01", None):
        body = {"downloader": "alice", "api_version": "2"}
        if version:
            body["version"] = version
        assert post(client, "/proj/request", body).status_code == 455
    assert r.zcard(K.out) == 0 and r.hget(K.stats, "requests_outdated") == "3"
    ok = post(client, "/proj/request", {"downloader": "alice", "api_version": "2", "version": "20240101.10"})
    assert ok.status_code == 200


def test_lowering_the_minimum_version_is_seen_without_any_claim(client, project, admin):
    # A 455 is decided in the API worker from its cached settings and reaches no script, so no
    # script reply can tell the worker that the minimum changed: the cache must expire by itself.
    body = {"downloader": "alice", "api_version": "2", "version": "20240101.01"}
    project_verbs.set_settings(admin, P, {"min_version": "20240101.02"})
    assert post(client, "/proj/request", body).status_code == 455  # cached now
    project_verbs.set_settings(admin, P, {"min_version": "20240101.01"})
    time.sleep(1.1)
    assert post(client, "/proj/request", body).status_code == 200


def test_blocked_is_403(client, project, admin):
    limit_verbs.block(admin, "name:mallory", P)
    res = post(client, "/proj/request", {"downloader": "mallory", "api_version": "2"})
    assert res.status_code == 403


def test_done_answers_ok_and_is_idempotent(client, project, r):
    names = post(client, "/proj/multi=3//request", {"downloader": "alice", "api_version": "2"}).json[
        "item_name"
    ]
    body = {
        "downloader": "alice",
        "version": "1",
        "item": names,
        "bytes": {"data": 30},
        "id": {"hashes": ["x"]},
    }
    for _ in range(3):
        res = post(client, "/proj/done", body)
        assert res.status_code == 200 and res.text == "OK"
    assert r.scard(K.done) == 3 and r.hget(K.downloader_count, "alice") == "3"
    assert r.zscore(K.downloader_bytes, "alice") == 30


def test_done_for_a_name_never_seen_answers_ok_and_adds_nothing(client, project, r):
    res = post(client, "/proj/done", {"downloader": "alice", "item": "nope", "bytes": {}})
    assert res.status_code == 200 and res.text == "OK"
    assert not r.sismember(K.done, "nope") and r.hget(K.stats, "dones_unknown") == "1"


def test_done_plus_request(client, project, r):
    first = post(client, "/proj/request", {"downloader": "alice", "api_version": "2"})
    name = first.json["item_name"]
    res = post(
        client,
        "/proj/done+request",
        {"downloader": "alice", "api_version": "2", "item": name, "bytes": {"data": 1}},
    )
    assert res.status_code == 200 and res.json["item_name"] != name
    assert r.sismember(K.done, name)


def test_release_returns_the_claim(client, project, r):
    name = post(client, "/proj/request", {"downloader": "alice", "api_version": "2"}).json["item_name"]
    res = post(client, "/proj/release", {"downloader": "alice", "item": name})
    assert res.status_code == 200 and r.sismember(K.todo, name) and r.zcard(K.out) == 0


def test_upload_target(client, project, admin):
    res = post(client, "/proj/upload", {"downloader": "alice", "item_name": "x", "version": "1"})
    assert res.status_code == 200 and res.json == {}
    project_verbs.set_upload_target(admin, P, "rsync://up.example/mod/:downloader/", "active")
    res = post(client, "/proj/upload", {"downloader": "alice", "item_name": "x", "version": "1"})
    assert res.json == {"upload_target": "rsync://up.example/mod/alice/"}


def test_uploaded_is_logged(client, project, r):
    res = post(client, "/proj/uploaded", {"uploader": "alice", "item": "item1", "server": "s1"})
    assert res.status_code == 200 and res.text == "OK"
    assert r.xrange(K.uploads)[0][1]["server"] == "s1"


def test_item_status_json(client, project):
    name = post(client, "/proj/request", {"downloader": "alice", "api_version": "2"}).json["item_name"]
    res = client.simulate_get(f"/proj/items/{name}.json")
    assert res.json["status"] == "out" and res.json["downloader"] == "alice"
    unknown = client.simulate_get("/proj/items/zzz.json").json
    assert (unknown["status"], unknown["downloader"]) == (None, None)


def test_stats_json(client, project):
    names = post(client, "/proj/multi=2//request", {"downloader": "alice", "api_version": "2"}).json[
        "item_name"
    ]
    post(client, "/proj/done", {"downloader": "alice", "item": names, "bytes": {"data": 7}})
    stats = client.simulate_get("/proj/stats.json").json
    assert stats["done"] == 2 and stats["out"] == 0 and stats["todo_total"] == 18
    assert stats["leaderboard"] == [{"downloader": "alice", "bytes": 7, "items": 2, "version": None}]
    assert stats["irsr"] == 1.0 and stats["domain_bytes"] == {"data": 7}


BAD_REQUESTS = [
    ("/proj/request", b"{not json", 400, "bad_json"),
    ("/proj/request", b"[1, 2]", 400, "bad_json"),
    ("/proj/request", {"downloader": "ab"}, 400, "bad_downloader"),
    ("/proj/request", {"downloader": "alice\n"}, 400, "bad_downloader"),
    ("/proj/request", {"downloader": "alice\nbob"}, 400, "bad_downloader"),
    ("/proj/request", {"downloader": 12345}, 400, "bad_downloader"),
    ("/proj/request", {"downloader": "alice", "version": 5}, 400, "bad_version"),
    ("/proj/multi=0/request", {"downloader": "alice", "api_version": "2"}, 400, "bad_multi"),
    ("/proj/request", b"x" * (1 << 20 + 1), 413, "bad_too_large"),
    ("/proj/done", {"downloader": "alice", "item": 5}, 400, "bad_item"),
    ("/proj/done", {"downloader": "alice", "item": ""}, 400, "bad_item"),
    ("/proj/done", {"downloader": "alice", "item": "a\0\0b"}, 400, "bad_item"),
    # Lua would print such totals in exponent form and Redis refuse them mid-script.
    (
        "/proj/done",
        {"downloader": "alice", "item": "item0", "bytes": {f"d{n}": 2**53 - 1 for n in range(20)}},
        400,
        "bad_bytes",
    ),
    (
        "/proj/done",
        {"downloader": "alice", "item": "item0", "bytes": {f"d{n}": 1 for n in range(33)}},
        400,
        "bad_bytes",
    ),
    ("/proj/done", {"downloader": "alice", "item": "x" * 5000}, 400, "bad_item"),
    ("/proj/done", {"downloader": "alice", "item": "item1", "bytes": {"d": -1}}, 400, "bad_bytes"),
    ("/proj/done", {"downloader": "alice", "item": "item1", "bytes": [1]}, 400, "bad_bytes"),
    ("/proj/done", {"downloader": "alice", "item": "item1", "bytes": {"d": "1"}}, 400, "bad_bytes"),
    ("/proj/done", {"item": "item1"}, 400, "bad_downloader"),
    ("/proj/release", {"item": 3}, 400, "bad_item"),
    ("/proj/upload", {"downloader": "a b c"}, 400, "bad_downloader"),
    ("/proj/uploaded", {"uploader": "alice", "item": ""}, 400, "bad_item"),
]


@pytest.mark.parametrize("path,body,status,field", BAD_REQUESTS)
def test_bad_input_is_refused_counted_and_changes_nothing(client, project, r, path, body, status, field):
    before = snapshot(r)
    res = post(client, path, body)
    assert res.status_code == status
    assert res.text.strip() and "\n" not in res.text.strip()  # one line of reason
    assert snapshot(r) == before
    assert r.hget(K.stats, field) == "1"


def test_unknown_project_is_404_counted_globally_and_creates_nothing(client, project, r):
    keys_before = set(r.scan_iter())
    for path in ("/nope/request", "/nope/done", "/nope/multi=2//request"):
        res = post(client, path, {"downloader": "alice", "api_version": "2", "item": "x"})
        assert res.status_code == 404 and "unknown project" in res.text
    assert set(r.scan_iter()) - keys_before == {GLOBAL_STATS}
    assert r.hget(GLOBAL_STATS, "bad_unknown_project") == "3"


def test_protocol_paths_never_redirect(client, project):
    for path in ("/proj/request/", "/proj//request", "//proj/multi=2//request"):
        res = post(client, path, {"downloader": "alice", "api_version": "2"})
        assert res.status_code == 200, path


def test_redis_down_is_503_not_500(engine, implementation, admin, redis_server):
    from falcon import testing

    from tracker_api.app import create_app
    from tracker_core.items.engine import Engine

    project_verbs.create(admin, P)
    dead = Engine("redis://127.0.0.1:1/0")
    res = post(testing.TestClient(create_app(dead)), "/proj/request", {"downloader": "alice"})
    assert res.status_code == 503 and "retry" in res.text


def test_a_script_redis_refuses_is_503_and_changes_nothing(client, project, r):
    # Out of memory under noeviction: Redis refuses the claim script's first write.
    before = snapshot(r)
    r.config_set("maxmemory", 1)
    try:
        res = post(client, "/proj/request", {"downloader": "alice", "api_version": "2"})
    finally:
        r.config_set("maxmemory", 0)
    assert res.status_code == 503 and "retry" in res.text
    assert snapshot(r) == before


def test_unknown_paths_and_methods_get_one_line_and_are_counted(client, project, r):
    res = client.simulate_get("/api/admin/nosuchthing/at/all")
    assert res.status_code == 404 and res.text.count("\n") == 1 and "no such path" in res.text
    res = client.simulate_put("/proj/request", body=b"{}")
    assert res.status_code == 405 and "PUT is not allowed" in res.text and "POST" in res.headers["allow"]
    res = client.simulate_post("/backfeed/legacy/proj-abcdefgh/extra", body=b"a\0")
    assert res.status_code == 404 and res.json["status_code"] == 404
    res = client.simulate_get("/backfeed/legacy/proj-abcdefgh")
    assert res.status_code == 405 and res.json["status_code"] == 405
    assert r.hget(GLOBAL_STATS, "bad_path") == "2" and r.hget(GLOBAL_STATS, "bad_method") == "2"
