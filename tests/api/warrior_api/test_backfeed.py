"""Backfeed through HTTP and the CLI against a real Redis: dedup counts, parameters, refusals."""

import json
import threading
from urllib.parse import quote

import pytest
from falcon import testing

from support.state import snapshot
from tracker_api.app import create_app
from tracker_core.admin import item_verbs
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

P = "disc-o"  # a '-' in the name: the project is the part before the last '-'
K = ProjectKeys(P)


@pytest.fixture
def secret(cli):
    assert cli("project", "create", P).exit_code == 0
    res = cli("backfeed", "secret", "create", P, "--json")
    assert res.exit_code == 0, res.output
    created = json.loads(res.output)
    assert created["path"] == f"/backfeed/legacy/{P}-{created['secret']}"
    return created["secret"]


def post(client, secret, body: bytes, project=P, **params):
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params.items())
    return client.simulate_post(f"/backfeed/legacy/{project}-{secret}", body=body, query_string=query or None)


def queued(res) -> int:
    assert res.status_code == 200, res.text
    answer = res.json
    assert answer["status_code"] == 200
    return int(answer["data"].removesuffix(" items queued for deduplication"))


def test_new_items_are_queued_once_and_seen_ones_dropped(client, secret, r):
    assert queued(post(client, secret, b"a\0b\0a\0c\0")) == 4  # trailing NUL allowed
    assert r.smembers(K.backfeed) == {"a", "b", "c"}
    assert queued(post(client, secret, b"c\0d")) == 2
    assert r.smembers(K.backfeed) == {"a", "b", "c", "d"}
    stats = r.hgetall(K.stats)
    assert (stats["backfeed_new"], stats["backfeed_seen"]) == ("4", "2")


def test_every_query_parameter_form(client, secret, r):
    assert queued(post(client, secret, b"x\ny\n", delimiter="\n")) == 2
    # The empty entry between ",," is refused on its own and counted (test_backfeed_entries).
    assert (
        post(client, secret, b"x,,y,z", delimiter=",").json["data"]
        == "3 items queued for deduplication; refused: 1 empty"
    )
    assert r.smembers(K.backfeed) == {"x", "y", "z"}
    # With an itemseparator the key before it is what dedup uses; the whole entry is queued.
    body = b"k1\x1fone\0k2\x1ftwo\0k1\x1fagain\0"
    assert queued(post(client, secret, body, itemseparator="\x1f", shard="s-1")) == 3
    assert r.smembers(K.backfeed) == {"x", "y", "z", "k1\x1fone", "k2\x1ftwo"}
    assert queued(post(client, secret, b"k2|other\0z|x\0", itemseparator="|", shard="s-1")) == 2
    assert r.scard(K.backfeed) == 5
    assert queued(post(client, secret, b"q\0", shard="s-2")) == 1
    assert r.hgetall(K.backfeed_shards) == {"s-1": "5", "s-2": "1"}
    assert queued(post(client, secret, b"")) == 0


def test_every_way_in_passes_the_same_filter(client, secret, cli, r, tmp_path):
    source = tmp_path / "items.txt"
    source.write_text("one\ntwo\nthree\n")
    res = cli("items", "add", P, str(source), "--json")
    assert json.loads(res.output.splitlines()[-1]) == {"added": 3, "duplicates": 0}
    assert queued(post(client, secret, b"one\0four\0two\0")) == 3
    assert r.smembers(K.backfeed) == {"four"}
    assert r.smembers(K.todo) == {"one", "two", "three"}
    source.write_text("four\nfive\n")
    res = cli("items", "add", P, str(source), "--json")
    assert json.loads(res.output.splitlines()[-1]) == {"added": 1, "duplicates": 1}
    assert r.smembers(K.todo) == {"one", "two", "three", "five"}


def test_secrets_are_stored_hashed_listed_without_secret_and_revocable(client, secret, cli, r):
    for key in r.scan_iter():
        kind = r.type(key)
        dumped = repr({"hash": r.hgetall, "set": r.smembers}.get(kind, r.dump)(key))
        assert secret not in dumped
    listed = json.loads(cli("backfeed", "secret", "list", P, "--json").output)
    assert len(listed) == 1 and secret not in json.dumps(listed)
    second = json.loads(cli("backfeed", "secret", "create", P, "--json").output)["secret"]
    assert queued(post(client, second, b"a\0")) == 1
    assert cli("backfeed", "secret", "revoke", P, listed[0]["id"]).exit_code == 0
    assert post(client, secret, b"b\0").status_code == 403
    assert queued(post(client, second, b"c\0")) == 1
    assert cli("backfeed", "secret", "revoke", P, "nosuchid").exit_code == 1
    assert r.smembers(K.backfeed) == {"a", "c"}


@pytest.mark.parametrize(
    "case",
    [
        "wrong_secret",
        "bad_secret_form",
        "unknown_project",
        "no_secret",
        "oversized",
        "long_delimiter",
        "same_separator",
        "bad_shard",
        "too_many_items",
    ],
)
def test_bad_input_is_refused_counted_and_changes_nothing(client, secret, r, case):
    post(client, secret, b"seed\0")
    before = snapshot(r)
    stats_before = r.hgetall(K.stats)
    status, res = {
        "wrong_secret": (403, lambda: post(client, "0" * 32, b"a\0")),
        "bad_secret_form": (403, lambda: post(client, "x!", b"a\0")),
        "unknown_project": (404, lambda: post(client, secret, b"a\0", project="nope")),
        "no_secret": (403, lambda: client.simulate_post(f"/backfeed/legacy/{P}", body=b"a")),
        "oversized": (413, lambda: post(client, secret, b"a\0" * (3 * 1024 * 1024))),
        "long_delimiter": (400, lambda: post(client, secret, b"a\0", delimiter="x" * 17)),
        "same_separator": (400, lambda: post(client, secret, b"a\0", itemseparator="\0")),
        "bad_shard": (400, lambda: post(client, secret, b"a\0", shard="no spaces")),
        # A whole-post bound (an over-long entry is refused on its own: test_backfeed_entries).
        "too_many_items": (400, lambda: post(client, secret, b"a\0" * 10_001)),
    }[case]
    answer = res()
    assert answer.status_code == status
    assert answer.json["status_code"] == status and answer.json["reason"]
    assert "\n" not in answer.json["reason"]
    assert snapshot(r) == before
    stats = r.hgetall(K.stats)
    refused = sum(int(v) for f, v in stats.items() if f.startswith("backfeed_")) - sum(
        int(v) for f, v in stats_before.items() if f.startswith("backfeed_")
    )
    if case in ("unknown_project", "no_secret", "bad_secret_form"):
        assert refused == 0 and int(r.hget("tracker:stats", "backfeed_refused")) == 1
    else:
        assert refused == 1


def test_overlapping_batches_from_two_clients_queue_each_item_once(secret, redis_url, r):
    items = [b"item-%d" % i for i in range(3000)]
    results = {}

    def warrior(name, chosen):
        client = testing.TestClient(create_app(Engine(redis_url)))
        total = 0
        for start in range(0, len(chosen), 400):
            total += queued(post(client, secret, b"\0".join(chosen[start : start + 400])))
        results[name] = total

    threads = [
        threading.Thread(target=warrior, args=("a", items[:2000])),
        threading.Thread(target=warrior, args=("b", items[1000:][::-1])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": 2000, "b": 2000}
    assert r.scard(K.backfeed) == 3000
    stats = r.hgetall(K.stats)
    assert (int(stats["backfeed_new"]), int(stats["backfeed_seen"])) == (3000, 1000)


def test_filter_command_shows_and_sets_the_geometry(cli, admin):
    assert cli("project", "create", P).exit_code == 0
    res = cli("backfeed", "filter", P, "--capacity", "5000", "--fp-rate", "0.001", "--json")
    shown = json.loads(res.output)
    assert shown["capacity"] == 5000 and shown["layers"][0]["capacity"] == 5000
    assert json.loads(cli("backfeed", "filter", P, "--json").output)["capacity"] == 5000
    assert cli("project", "create", "other").exit_code == 0
    info = json.loads(cli("backfeed", "filter", "other", "--json").output)
    assert info["fp_rate"] == 1e-6 and 28.75 < info["bits_per_item_at_capacity"] < 28.76 * 1.05
    item_verbs.add(admin, P, ["a"])
    res = cli("backfeed", "filter", P, "--capacity", "10")
    assert res.exit_code == 1 and "already holds items" in res.output
    assert json.loads(cli("backfeed", "filter", P, "--json").output)["items"] == 1


def test_filter_command_sets_the_kind_of_an_empty_filter(cli):
    assert cli("project", "create", P).exit_code == 0
    shown = json.loads(cli("backfeed", "filter", P, "--kind", "fingerprint", "--json").output)
    assert shown["kind"] == "fingerprint" and shown["layers"][0]["fingerprint_bytes"] == 3
    assert json.loads(cli("backfeed", "filter", P, "--json").output)["kind"] == "fingerprint"
    res = cli("backfeed", "filter", P, "--kind", "cuckoo")
    assert res.exit_code == 2 and "cuckoo" in res.output  # not a choice: nothing changed
    assert json.loads(cli("backfeed", "filter", P, "--json").output)["kind"] == "fingerprint"


def test_shards_are_counted_and_mappable_to_a_queue(client, secret, cli, r, monkeypatch):
    from tracker_core.items import backfeed

    monkeypatch.setattr(backfeed, "SHARD_MAP_TTL_S", 0.0)
    assert queued(post(client, secret, b"a\0b\0", shard="s1")) == 2
    res = cli("backfeed", "shard-map", P, "s1", "secondary")
    assert res.exit_code == 0, res.output
    assert cli("backfeed", "shard-map", P, "s1", "nowhere").exit_code == 1
    assert queued(post(client, secret, b"b\0c\0", shard="s1")) == 2
    assert queued(post(client, secret, b"d\0", shard="s2")) == 1
    assert r.smembers(K.backfeed) == {"a", "b", "d"} and r.smembers(K.secondary) == {"c"}
    shown = json.loads(cli("backfeed", "shard-map", P, "--json").output)
    assert shown == {"map": {"s1": "secondary"}, "items": {"s1": 4, "s2": 1}}
    assert cli("backfeed", "shard-map", P, "s1", "--remove").exit_code == 0
    assert queued(post(client, secret, b"e\0", shard="s1")) == 1
    assert "e" in r.smembers(K.backfeed)
    assert cli("backfeed", "shard-map", P, "s3", "downloader:bob").exit_code == 0
    assert queued(post(client, secret, b"f\0", shard="s3")) == 1
    assert r.smembers(K.downloader_queue("bob")) == {"f"}
    assert r.smembers(K.downloader_queues) == {"bob"}


def test_the_real_server_answers_backfeed_as_clients_expect(secret, live_server, r):
    import urllib.error
    import urllib.request

    def send(path, body):
        request = urllib.request.Request(
            live_server.base + path, data=body, method="POST", headers={"Connection": "close"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    path = f"/backfeed/legacy/{P}-{secret}"
    assert send(path + "?shard=w1", b"u1\0u2\0u1\0") == (
        200,
        {"status_code": 200, "data": "3 items queued for deduplication"},
    )
    assert send(path + "?delimiter=%0A&itemseparator=%1F", b"u2\x1fx\nu3\x1fy\n")[0] == 200
    assert r.smembers(K.backfeed) == {"u1", "u2", "u3\x1fy"}
    status, answer = send(f"/backfeed/legacy/{P}-{'0' * 32}", b"u9\0")
    assert status == 403 and answer["status_code"] == 403 and "secret" in answer["reason"]
    assert "u9" not in r.smembers(K.backfeed)


def test_an_item_of_the_longest_name_done_takes_is_queued(client, secret, r):
    longest = "é" * 2048  # 4,096 bytes, 2,048 characters
    assert queued(post(client, secret, longest.encode() + b"\0")) == 1
    assert longest in r.smembers(K.backfeed)


def test_a_delimiter_that_is_not_utf8_splits_the_body(client, secret, r):
    # %FF is one byte; decoded as UTF-8 text it would become U+FFFD and split nothing.
    res = client.simulate_post(
        f"/backfeed/legacy/{P}-{secret}", body=b"x1\xffx2\xffx3\xff", query_string="delimiter=%FF"
    )
    assert queued(res) == 3
    assert {"x1", "x2", "x3"} <= r.smembers(K.backfeed)
    both = client.simulate_post(
        f"/backfeed/legacy/{P}-{secret}",
        body=b"y1\x1fa\ny2\x1fb\n",
        query_string="delimiter=%0A&itemseparator=%1F",
    )
    assert queued(both) == 2


def test_backfeed_shards_keeps_1000_names_and_counts_the_rest_under_other(client, secret, r):
    # Anyone with the secret names shards: each new name was a permanent field.
    r.hset(K.backfeed_shards, mapping={f"s{i}": 1 for i in range(999)})
    assert queued(post(client, secret, b"a\0", shard="s-1000th")) == 1  # at the cap: kept
    assert r.hget(K.backfeed_shards, "s-1000th") == "1"
    assert queued(post(client, secret, b"b\0c\0", shard="s-1001st")) == 2  # past it: 'other'
    assert queued(post(client, secret, b"d\0", shard="x" * 64)) == 1
    assert not r.hexists(K.backfeed_shards, "s-1001st")
    assert r.hget(K.backfeed_shards, "other") == "3"
    assert queued(post(client, secret, b"e\0", shard="s5")) == 1  # known: still counted
    assert r.hget(K.backfeed_shards, "s5") == "2" and r.hlen(K.backfeed_shards) == 1001
    assert r.smembers(K.backfeed) == {"a", "b", "c", "d", "e"}
