"""A claimed batch is always reportable: the done body limit holds a whole claim at the maxima.

max_multi at its ceiling (1,000) x names at the longest (4,096 characters), encoded the way the
warrior encodes its done (seesaw's TrackerRequest.send_request: ``json.dumps``, ASCII only), in
the worst case: every character outside the BMP, which json.dumps writes as two ``\\uXXXX``
escapes (12 bytes for one character), and the NUL between names as ``\\u0000``. A done refused
with 413 would be retried for ever and the batch never reported.
"""

import json

import orjson

from support.seesaw_runner import run_warrior
from tracker_api.warrior_api import warrior_routes
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.compiled import protocol
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.settings_schema import MAX_MULTI_CEILING

P = "maxdone"
K = ProjectKeys(P)
ASTRAL = "\U0001f600"  # json.dumps: "\ud83d\ude00", 12 bytes for one character


def worst_names(count: int = MAX_MULTI_CEILING) -> list[str]:
    """COUNT distinct names of MAX_ITEM_CHARS characters, every one outside the BMP."""
    return [chr(0x10000 + i) + ASTRAL * (protocol.MAX_ITEM_CHARS - 1) for i in range(count)]


def worst_done_body(names: list[str]) -> bytes:
    """A done body as seesaw sends it, with every other field at its own maximum too."""
    stats = {
        "downloader": "d" * 30,
        "version": ASTRAL * 64,
        "item": "\0".join(names),
        "bytes": {f"domain-{i:02d}-" + "x" * 50: 10**11 for i in range(32)},
        "id": {"warrior": "seesaw", "hashes": ["0" * 64] * 16},
    }
    return json.dumps(stats).encode()


def test_the_worst_case_done_body_of_a_whole_claim_fits_the_limit():
    names = worst_names()
    assert len(names) == MAX_MULTI_CEILING == warrior_routes.MAX_DONE_ITEMS
    assert {len(n) for n in names} == {protocol.MAX_ITEM_CHARS}
    body = worst_done_body(names)
    assert len(json.dumps(names[0])) == 12 * protocol.MAX_ITEM_CHARS + 2
    assert len(body) > 49_000_000  # 12 bytes a character: 1,000 x 4,096 x 12
    assert len(body) <= warrior_routes.MAX_DONE_BODY_BYTES
    # What the limit leaves for the other fields (downloader, version, bytes, id), at least:
    assert warrior_routes.MAX_DONE_BODY_BYTES - len(body) > 1_000_000 - 20_000


def claim_all(web) -> list[str]:
    request = {"downloader": "alice", "api_version": "2", "version": "20240102.01"}
    res = web.simulate_post(
        f"/{P}/multi={MAX_MULTI_CEILING}//request",
        body=orjson.dumps(request),
        headers={"Content-Type": "application/json"},
    )
    assert res.status_code == 200
    return res.json["item_name"].split("\0")


def test_a_whole_worst_case_claim_is_released_and_done_in_one_body_each(admin, r, web):
    project_verbs.create(admin, P)
    project_verbs.set_settings(admin, P, {"max_multi": str(MAX_MULTI_CEILING)})
    names = worst_names()
    item_verbs.add(admin, P, names)
    claimed = claim_all(web)
    assert sorted(claimed) == sorted(names)
    body = json.dumps({"downloader": "alice", "item": "\0".join(claimed)}).encode()
    assert len(body) > 49_000_000
    res = web.simulate_post(f"/{P}/release", body=body, headers={"Content-Type": "application/json"})
    assert res.status_code == 200 and res.text == "OK"
    assert not r.exists(K.claims) and r.scard(K.todo) == MAX_MULTI_CEILING
    claimed = claim_all(web)
    body = worst_done_body(claimed)
    res = web.simulate_post(f"/{P}/done", body=body, headers={"Content-Type": "application/json"})
    assert res.status_code == 200 and res.text == "OK"
    assert r.scard(K.done) == MAX_MULTI_CEILING and not r.exists(K.out)


def test_a_body_past_the_done_limit_is_refused_413_and_changes_nothing(admin, r, web):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ["a"])
    limit = warrior_routes.MAX_DONE_BODY_BYTES
    padding = b" " * (limit - len(b'{"downloader": "alice", "item": "a"}'))
    at_limit = b'{"downloader": "alice", "item": "a"' + padding + b"}"
    assert len(at_limit) == limit
    res = web.simulate_post(f"/{P}/done", body=at_limit)
    assert res.status_code == 200 and res.text == "OK"  # read whole: a queued name, refused
    assert r.hget(K.stats, "dones_refused") == "1"
    res = web.simulate_post(f"/{P}/done", body=at_limit + b" ")
    assert res.status_code == 413 and str(limit) in res.text
    assert r.smembers(K.todo) == {"a"}


def test_seesaw_reports_a_whole_claim_at_the_maxima_through_the_real_server(admin, r, live_server, tmp_path):
    # seesaw's own pipeline: GetItemFromTracker with multi=1000, PrepareStatsForTracker and
    # SendDoneToTracker, which json.dumps the done (about 49 MB for these names).
    project_verbs.create(admin, P)
    project_verbs.set_settings(admin, P, {"max_multi": str(MAX_MULTI_CEILING)})
    names = worst_names()
    item_verbs.add(admin, P, names)
    result, _log = run_warrior(live_server, tmp_path, project=P, claims=1, multi=MAX_MULTI_CEILING)
    assert result["claims"] == 1 and not result["failed"]
    assert sorted(result["names"]) == sorted(names)
    assert r.scard(K.done) == MAX_MULTI_CEILING and not r.exists(K.out)
