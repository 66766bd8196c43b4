"""No answer can fail after a claim: claim-21.lua against bad stored data, odd settings and its
maxima, through the HTTP API and the engine, against a real Redis.

The claim script's writes stay when it fails half-way, and an answer that fails after the script
claimed leaves items in `out` that nobody received. Each test here puts the project in a state
old data or an odd setting can produce and checks that every item is still in exactly one place.
"""

import json

import orjson
import pytest
import redis

from support.projects import new_project
from tracker_core import scripts
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.settings_schema import MAX_MULTI_CEILING

P = "faults"
K = ProjectKeys(P)
REQUEST = {"downloader": "alice", "api_version": "2", "version": "20240101.01"}


def url(n: int, size: int = 120) -> str:
    """A URL item name of SIZE characters, with the characters real ones carry."""
    head = f"https://example.com/p/{n}/a b?q=%20x&r=/s#frag-{n}-"
    return head + "x" * (size - len(head))


@pytest.fixture
def project(admin):
    return new_project(admin, P, settings={"max_multi": str(MAX_MULTI_CEILING)})


@pytest.fixture
def raw(redis_url):
    """A client that writes and reads bytes: names that are not UTF-8 (old data)."""
    return redis.Redis.from_url(redis_url)


def post(client, path, body):
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return client.simulate_post(path, body=raw, headers={"Content-Type": "application/json"})


def dead_reason(raw, name: bytes) -> str:
    return json.loads(raw.hget(K.dead, name))["reason"]


BAD_UTF8 = "https://example.com/caf\xe9?q=1".encode("latin-1")  # Latin-1 bytes from old data


def test_a_name_that_is_not_utf8_never_strands_its_batch(client, project, admin, raw, r):
    good = [url(n) for n in range(4)]
    item_verbs.add(admin, P, good)
    raw.sadd(K.todo, BAD_UTF8)
    res = post(client, "/faults/multi=5//request", REQUEST)
    assert res.status_code == 200
    given = res.json["item_name"].split("\0")
    assert sorted(given) == sorted(good)
    # Out holds exactly what the client received; the bad name waits in `dead` with the reason.
    assert set(r.zrange(K.out, 0, -1)) == set(good)
    assert "not valid UTF-8" in dead_reason(raw, BAD_UTF8)
    assert raw.scard(K.todo) == 0
    assert r.hget(K.stats, "items_unservable") == "1" and r.hget(K.stats, "items_dead") == "1"


def test_a_legacy_request_never_gets_a_name_that_is_not_utf8(client, project, raw, r):
    raw.sadd(K.todo, BAD_UTF8)
    res = post(client, "/faults/request", {"downloader": "alice"})
    assert res.status_code == 404 and res.text == ""
    assert r.zcard(K.out) == 0 and raw.hexists(K.dead, BAD_UTF8)


def test_a_name_holding_nul_is_never_handed_out(client, project, admin, raw, r):
    # The client splits item_name on NUL: such a name could never be reported done.
    raw.sadd(K.todo, b"https://example.com/a\x00b")
    item_verbs.add(admin, P, [url(1)])
    res = post(client, "/faults/multi=5//request", REQUEST)
    assert res.status_code == 200 and res.json["item_name"] == url(1)
    assert r.zrange(K.out, 0, -1) == [url(1)]
    assert "NUL" in dead_reason(raw, b"https://example.com/a\x00b")


def test_a_claimed_name_that_is_not_utf8_goes_dead_instead_of_being_reclaimed(
    client, project, admin, raw, r, clock
):
    project_verbs.set_settings(admin, P, {"reclaim_ttl_s": "60"})
    claimed_ms = int(clock.now * 1000) - 10**9
    raw.zadd(K.out, {BAD_UTF8: claimed_ms})
    raw.hset(K.claims, BAD_UTF8, b"bob\t10.0.0.2\t1")
    raw.hset(K.downloader_claims, "bob", 1)
    res = post(client, "/faults/request", {"downloader": "alice", "api_version": "2"})
    assert res.status_code == 404
    assert r.zcard(K.out) == 0 and r.hlen(K.claims) == 0
    assert r.hget(K.downloader_claims, "bob") is None
    assert r.hget(K.downloader_claims, "alice") is None and r.hlen(K.reclaim_history) == 0
    rounds = json.loads(raw.hget(K.dead, BAD_UTF8))["rounds"]
    assert [h["downloader"] for h in rounds] == ["bob", "alice"]


def test_a_held_name_that_is_not_utf8_goes_dead(client, project, admin, raw, r):
    limit_verbs.add(admin, P, "example", "domain:example.com", "1000/s")
    good = url(7)
    for entry in (b"example\x00" + good.encode(), b"example\x00" + BAD_UTF8):
        raw.zadd(K.limited, {entry: 0})
    raw.zadd(K.limits_ready, {"example": 0})
    res = post(client, "/faults/multi=5//request", REQUEST)
    assert res.status_code == 200 and res.json["item_name"] == good
    assert r.zrange(K.out, 0, -1) == [good] and raw.zcard(K.limited) == 0
    assert raw.hexists(K.dead, BAD_UTF8)


def test_a_batch_of_only_unservable_names_answers_404_and_strands_nothing(client, project, raw, r):
    raw.sadd(K.todo, BAD_UTF8, b"nul\x00name")
    res = post(client, "/faults/multi=5//request", REQUEST)
    assert res.status_code == 404 and res.text == ""
    assert r.zcard(K.out) == 0 and r.hlen(K.claims) == 0 and r.hget(K.downloader_claims, "alice") is None
    assert raw.hlen(K.dead) == 2 and r.hget(K.stats, "items_unservable") == "2"
    record = json.loads(raw.hget(K.dead, BAD_UTF8))
    assert record["last_downloader"] == "alice" and record["claims"] == 1


def test_bury_takes_back_only_the_claims_of_that_downloader(project, admin, engine, r):
    item_verbs.add(admin, P, [url(1)])
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [url(1)])
    assert engine.bury_unservable(P, "alice", {url(1): "test"}) == 0
    assert r.zrange(K.out, 0, -1) == [url(1)] and r.hlen(K.dead) == 0
    assert engine.bury_unservable(P, "bob", {url(1): "test"}) == 1
    assert r.zcard(K.out) == 0 and json.loads(r.hget(K.dead, url(1)))["reason"] == "test"


def test_unreadable_claim_records_and_histories_do_not_fail_reclaims(project, admin, engine, raw, r, clock):
    project_verbs.set_settings(admin, P, {"reclaim_ttl_s": "60"})
    now_ms = int(clock.now * 1000)
    for n, (record, history) in enumerate(
        ((b"alice\t10.0.0.1\t1", None), (b"garbage", None), (b"carol\t10.0.0.3\t2", b"{not json"))
    ):
        name = url(n)
        raw.zadd(K.out, {name: now_ms - 10**9})
        raw.hset(K.claims, name, record)
        if history:
            raw.hset(K.reclaim_history, name, history)
    status, items = engine.claim(P, "bob", "10.0.0.2", 5)
    assert status == 200 and sorted(items) == [url(0), url(1), url(2)]
    assert {r.hget(K.claims, url(n)).split("\t")[0] for n in range(3)} == {"bob"}
    assert r.hget(K.downloader_claims, "bob") == "3"
    assert len(json.loads(r.hget(K.reclaim_history, url(2)))) == 1  # restarted from this round


def test_an_unreadable_limit_record_does_not_lose_the_items_served_before_it(project, admin, engine, raw, r):
    limit_verbs.add(admin, P, "alpha", "prefix:https://alpha.example/", "1000/s")
    limit_verbs.add(admin, P, "beta", "prefix:https://beta.example/", "1000/s")
    raw.hset(K.limits, "beta", b"{not json")
    raw.zadd(K.limited, {b"alpha\x00https://alpha.example/1": 0, b"beta\x00https://beta.example/1": 0})
    raw.zadd(K.limits_ready, {"alpha": 0, "beta": 1})
    status, items = engine.claim(P, "bob", "10.0.0.2", 5)
    # The unreadable limit's items go out unthrottled, as a removed limit's do.
    assert status == 200
    assert sorted(items) == ["https://alpha.example/1", "https://beta.example/1"]
    assert r.zcard(K.out) == 2 and r.zcard(K.limited) == 0


def test_a_tiny_rate_limit_never_fails_after_the_pop(project, admin, engine, r):
    # 1e-300 items a minute: the limiter's expiry would be 6e304 ms, which SET refuses.
    project_verbs.set_settings(admin, P, {"rate_limit": "1e-300"})
    item_verbs.add(admin, P, [url(1), url(2)])
    status, items = engine.claim(P, "bob", "10.0.0.2", 1)
    assert status == 200 and r.zrange(K.out, 0, -1) == items and len(items) == 1
    assert r.scard(K.todo) == 1
    assert 0 < r.pttl(K.ratelimit) <= 366 * 86400 * 1000
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (429, [])


def run_claim(engine, now, wanted):
    """The claim script with raw ARGV (a time that is not a number reaches Redis as it is)."""
    return scripts.claim.send(
        engine.conn, scripts.claim.keys(K, downloader="bob", now_ms=0), (now, "bob", "10.0.0.2", wanted)
    )


def test_a_claim_for_more_than_the_ceiling_gets_the_ceiling_and_loses_nothing(
    project, admin, engine, r, clock
):
    # 5,000 wanted would unpack 10,000 arguments after the SPOP (Lua stops near 8,000).
    names = [f"n{n}" for n in range(5000)]
    item_verbs.add(admin, P, names)
    reply = run_claim(engine, int(clock.now * 1000), 5000)
    assert reply[0] == 200 and len(reply[2:]) == MAX_MULTI_CEILING
    assert r.zcard(K.out) == MAX_MULTI_CEILING and r.scard(K.todo) == 5000 - MAX_MULTI_CEILING
    assert r.hlen(K.claims) == MAX_MULTI_CEILING


def test_a_claim_with_a_time_that_is_not_a_number_changes_nothing(project, admin, engine, r):
    item_verbs.add(admin, P, [url(1)])
    with pytest.raises(scripts.ScriptError):
        run_claim(engine, "soon", 1)
    assert r.smembers(K.todo) == {url(1)} and r.zcard(K.out) == 0
    assert r.hget(K.stats, "requests") is None


@pytest.mark.parametrize("size", [2048, 4096])
def test_multi_1000_of_long_urls_claim_and_done_over_http(client, project, admin, r, size):
    names = [url(n, size) for n in range(MAX_MULTI_CEILING + 1)]  # one more than the maximum
    item_verbs.add(admin, P, names)
    res = post(client, f"/faults/multi={MAX_MULTI_CEILING + 1}//request", REQUEST)
    assert res.status_code == 200
    given = res.json["item_name"].split("\0")
    assert len(given) == MAX_MULTI_CEILING and len(set(given)) == MAX_MULTI_CEILING
    assert r.zcard(K.out) == MAX_MULTI_CEILING
    # The done seesaw sends for the whole batch: json.dumps of the NUL-joined names.
    body = json.dumps(
        {
            "downloader": "alice",
            "version": "20240101.01",
            "item": "\0".join(given),
            "bytes": {"data": 10**9},
            "id": {"names": given[:3]},
        }
    ).encode()
    assert len(body) > 1 << 20
    res = post(client, "/faults/done", body)
    assert res.status_code == 200 and res.text == "OK"
    assert r.zcard(K.out) == 0 and r.scard(K.done) == MAX_MULTI_CEILING
    assert r.hget(K.stats, "items_done") == str(MAX_MULTI_CEILING)
    # The one left over goes out next, alone.
    res = post(client, f"/faults/multi={MAX_MULTI_CEILING}//request", REQUEST)
    assert res.json["item_name"].split("\0") == list(set(names) - set(given))


@pytest.mark.slow
def test_the_real_client_claims_and_completes_multi_1000_of_4096_character_urls(
    admin, r, live_server, tmp_path
):
    # seesaw-kit's own GetItemFromTracker and SendDoneToTracker over `tracker serve`: the answer
    # is 4 MB of names and the done body as much, the documented maxima.
    from support.seesaw_runner import run_warrior

    project_verbs.create(admin, P, {"max_multi": str(MAX_MULTI_CEILING)})
    names = [url(n, 4096) for n in range(MAX_MULTI_CEILING)]
    item_verbs.add(admin, P, names)
    result, _ = run_warrior(live_server, tmp_path, project=P, claims=1, multi=MAX_MULTI_CEILING)
    assert result["claims"] == 1 and result["failed"] == []
    assert sorted(result["names"]) == sorted(names)
    assert r.zcard(K.out) == 0 and r.scard(K.todo) == 0 and r.scard(K.done) == MAX_MULTI_CEILING
    assert r.hget(K.downloader_count, "e2e-warrior") == str(MAX_MULTI_CEILING)


@pytest.mark.parametrize("field", ["max_claims_per_downloader", "claims_limit"])
def test_a_fractional_stored_cap_never_fails_the_claim(project, admin, engine, r, field):
    # Written around the validator (older data): SPOP and LIMIT take integers only.
    item_verbs.add(admin, P, [url(n) for n in range(5)])
    r.hset(K.settings, field, "2.5")
    status, items = engine.claim(P, "bob", "10.0.0.2", 5)
    assert status == 200 and len(items) == 2 and r.zcard(K.out) == 2 and r.scard(K.todo) == 3
