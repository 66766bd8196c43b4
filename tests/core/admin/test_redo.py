"""Redo on purpose: done items and items the Bloom filter has seen go back to a queue, audited.

By name, by file and by pattern; out and queued items stay where they are; limits hold redone
items; the one way past the filter; the per-call maximum; every item in one place after.
"""

import json

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from support import census
from support.counters import totals
from support.projects import new_project
from support.state import snapshot
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_core.access import audit, tokens
from tracker_core.admin import backfeed_verbs, checks, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError
from tracker_core.items import bloom
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import staging
from tracker_core.scripts import ScriptError

P = "redo"
K = ProjectKeys(P)


def url(i: int, tag: str = "u") -> str:
    """A URL item as the biggest projects have them: slashes, ?, %, # and a space."""
    return f"https://www.example.com/{tag}/{i}/page?q=a%20b&n={i}#frag {i}"


def long_url(i: int) -> str:
    return url(i, "long") + "/x" * 1000  # 2 KB and more


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


def assert_each_once(r, names) -> None:
    census.assert_each_once(r, K, names)


def items_done(r) -> int:
    return totals(r, K.stats).get("items_done", 0)


def finish(engine, names, downloader="alice"):
    """Claim and complete NAMES (all of the queue) through the engine, as warriors do."""
    got = []
    while len(got) < len(names):
        status, claimed = engine.claim(P, downloader, "10.0.0.1", 100)
        assert status == 200
        got += claimed
        assert engine.done(P, downloader, "1", claimed, ["example.com", 10], "").new == len(claimed)
    return got


def test_done_items_by_name_go_to_redo_items_done_drops_out_and_queued_stay(engine, r, project, ctx):
    names = [url(i) for i in range(6)] + [long_url(i) for i in range(4)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    assert items_done(r) == r.scard(K.done) == 10
    item_verbs.add(ctx, P, [url(100), url(101)])
    status, (out_item,) = engine.claim(P, "bob", "10.0.0.2", 1)
    queued_item = ({url(100), url(101)} - {out_item}).pop()

    redo = [url(0), long_url(1), url(2), out_item, queued_item, url(999)]
    result = item_verbs.redo(ctx, P, names=redo)
    assert result == {
        "requeued": 3,
        "from_done": 3,
        "from_seen": 0,
        "held": 0,
        "skipped": 3,
        "skipped_by_reason": {
            "out": 1,
            "queued": 1,
            "dead": 0,
            "offloaded": 0,
            "not_seen": 1,
            "maybe_offloaded": 0,
            "not_utf8": 0,
        },
    }
    assert r.smembers(K.redo) == {url(0), long_url(1), url(2)}
    assert items_done(r) == r.scard(K.done) == 7  # done count = done set
    assert r.hget(K.stats, "items_redone") == "3"
    assert r.zrange(K.out, 0, -1) == [out_item] and r.sismember(K.todo, queued_item)
    assert not r.sismember(K.redo, url(999))  # never seen: not queued by redo
    assert_each_once(r, names + [url(100), url(101)])
    # A repeat changes nothing: they are queued now.
    again = item_verbs.redo(ctx, P, names=[url(0), long_url(1), url(2)])
    assert again["requeued"] == 0 and again["skipped_by_reason"]["queued"] == 3
    # Served again (after the other queues) and done again: the count comes back.
    engine.done(P, "bob", "1", [out_item], [], "")
    left = [url(0), long_url(1), url(2), queued_item]
    assert sorted(finish(engine, left, "carol")) == sorted(left)
    assert items_done(r) == r.scard(K.done) == 12


@pytest.mark.parametrize("kind", bloom.KINDS)
def test_seen_items_found_nowhere_are_queued_bypassing_the_filter(engine, r, project, ctx, kind):
    backfeed_verbs.bloom_filter(ctx, P, kind=kind)  # redo reads every kind of filter
    project_verbs.set_settings(ctx, P, {"done_mode": "discard"})
    names = [url(i) for i in range(5)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    assert r.scard(K.done) == 0 and items_done(r) == 5
    # The filter drops them on every other way in (backfeed, items add)...
    assert item_verbs.add(ctx, P, names[:2]) == {"added": 0, "duplicates": 2}
    # ...redo queues them on purpose, into the queue asked for.
    result = item_verbs.redo(ctx, P, names=names[:2] + [url(50)], queue="todo")
    assert (result["from_seen"], result["skipped_by_reason"]["not_seen"]) == (2, 1)
    assert r.smembers(K.todo) == set(names[:2])
    # Discarded items cannot be told from cleared ones: items_done stays (see the README).
    assert items_done(r) == 5
    assert_each_once(r, names[:2])


def test_by_pattern_pages_over_done_with_a_cursor(engine, r, project, ctx):
    names = [url(i, "a") for i in range(300)] + [url(i, "b") for i in range(200)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    total, cursor, calls = 0, 0, 0
    while True:
        page = item_verbs.redo(ctx, P, pattern="https://www.example.com/b/*", cursor=cursor, limit=50)
        total, cursor, calls = total + page["requeued"], page["cursor"], calls + 1
        assert page["skipped_by_reason"]["too_long"] == 0
        if cursor == 0:
            break
    assert total == 200 and calls > 1
    assert r.smembers(K.redo) == {url(i, "b") for i in range(200)}
    assert items_done(r) == r.scard(K.done) == 300
    assert_each_once(r, names)


def test_redone_items_a_limit_matches_are_held(engine, r, project, ctx):
    names = [url(i, "img") for i in range(5)] + [url(i, "page") for i in range(5)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    limit_verbs.add(ctx, P, "images", "regex:/img/", "1/m")
    result = item_verbs.redo(ctx, P, pattern="*")
    assert (result["requeued"], result["held"]) == (10, 5)
    assert r.smembers(K.redo) == {url(i, "page") for i in range(5)}
    assert {m.split("\0", 1)[1] for m in r.zrange(K.limited, 0, -1)} == {url(i, "img") for i in range(5)}
    assert r.scard(K.limited_in) == 0
    # Held items are queued: a second redo by name leaves them there.
    assert item_verbs.redo(ctx, P, names=[url(0, "img")])["skipped_by_reason"]["queued"] == 1
    assert_each_once(r, names)


def test_downloader_queue_and_dead_items_are_places_too(engine, r, project, ctx):
    names = [url(i) for i in range(4)]
    item_verbs.add(ctx, P, names[:2], queue="downloader:alice")
    r.hset(K.dead, names[2], json.dumps({"times_claimed": 9}))
    item_verbs.add(ctx, P, [names[3]])
    r.srem(K.todo, names[3])  # gone from every place (a cleared queue), but seen
    result = item_verbs.redo(ctx, P, names=names, queue="downloader:bob")
    assert result["skipped_by_reason"]["queued"] == 2 and result["skipped_by_reason"]["dead"] == 1
    assert result["from_seen"] == 1 and r.smembers(K.downloader_queue("bob")) == {names[3]}
    assert "bob" in r.smembers(K.downloader_queues)
    assert_each_once(r, names)


def test_with_segment_files_a_seen_name_found_nowhere_is_left_unless_asked(engine, r, project, tmp_path, ctx):
    project_verbs.set_settings(ctx, P, {"done_mode": "offload"})
    names = [url(i) for i in range(10)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    assert staging.offload_one(r, K, tmp_path, 4, source="done") == 4
    on_disk = sorted(set(names) - r.smembers(K.done))
    result = item_verbs.redo(ctx, P, names=on_disk[:2])
    assert result["requeued"] == 0 and result["skipped_by_reason"]["maybe_offloaded"] == 2
    assert r.scard(K.redo) == 0
    forced = item_verbs.redo(ctx, P, names=on_disk[:2], even_if_offloaded=True)
    assert forced["from_seen"] == 2 and r.smembers(K.redo) == set(on_disk[:2])


def test_names_not_utf8_and_too_long_are_left_done(engine, r, project, ctx):
    item_verbs.add(ctx, P, [url(1)])
    finish(engine, [url(1)])
    raw = redis_bytes(r)
    prefix = "https://old.example/"
    at_limit = prefix + "y" * (checks.MAX_ITEM_CHARS - len(prefix))
    raw.sadd(K.done, (prefix + "\xff\xfe").encode("latin-1"), (at_limit + "y").encode(), at_limit.encode())
    r.hincrby(K.stats, "items_done", 3)  # the three added by hand: 4 done in all
    assert items_done(r) == 4
    result = item_verbs.redo(ctx, P, pattern="https://old.example/*")
    assert result["requeued"] == 1 and r.smembers(K.redo) == {at_limit}  # 4,096: redone
    assert result["skipped_by_reason"]["not_utf8"] == 1
    assert result["skipped_by_reason"]["too_long"] == 1  # 4,097: stays done
    assert raw.scard(K.done) == 3 and items_done(r) == 3


def redis_bytes(r):
    import redis

    return redis.Redis(
        connection_pool=redis.ConnectionPool(
            **{**r.connection_pool.connection_kwargs, "decode_responses": False}
        )
    )


def test_per_call_maximum_at_and_past_the_limit(r, project, ctx):
    names = [url(i) for i in range(checks.MAX_PAGE + 1)]
    pipe = r.pipeline(transaction=False)
    pipe.sadd(K.done, *names)
    pipe.hset(K.stats, "items_done", len(names))
    pipe.execute()
    before = snapshot(r)
    with pytest.raises(AdminError, match="1 to 10000"):
        item_verbs.redo(ctx, P, names=names)
    assert snapshot(r) == before
    result = item_verbs.redo(ctx, P, names=names[: checks.MAX_PAGE])
    assert result["from_done"] == checks.MAX_PAGE
    assert r.scard(K.redo) == checks.MAX_PAGE and items_done(r) == r.scard(K.done) == 1
    assert_each_once(r, names)
    for bad in ([], ["a\0b"], ["x" * (checks.MAX_ITEM_CHARS + 1)], "name", [5]):
        with pytest.raises(AdminError):
            item_verbs.redo(ctx, P, names=bad)
    for bad in (
        dict(names=["a"], pattern="*"),
        dict(),
        dict(pattern="*", queue="nowhere"),
        dict(pattern="*", cursor=-1),
        dict(pattern="", cursor=0),
        dict(names=["a"], even_if_offloaded="yes"),
    ):
        with pytest.raises(AdminError):
            item_verbs.redo(ctx, P, **bad)


def test_a_wrong_key_type_fails_before_anything_moved(engine, r, project, ctx):
    names = [url(i) for i in range(3)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    r.set(K.offloading, "not a set")
    before = snapshot(r)
    with pytest.raises(ScriptError):
        item_verbs.redo(ctx, P, names=names)
    assert snapshot(r) == before and items_done(r) == 3


def test_admin_api_redo_is_audited_once_per_call(engine, admin, r, project, ctx):
    web = testing.TestClient(create_app(engine))
    token = tokens.create(r, P)[0]
    names = [url(i) for i in range(20)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)

    def post(body):
        return web.simulate_post(
            f"/api/admin/projects/{P}/redo",
            body=orjson.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    res = post({"items": names[:5], "queue": "secondary"})
    assert res.status_code == 200, res.text
    assert res.json["requeued"] == 5 and r.scard(K.secondary) == 5
    res = post({"pattern": "*n=1*", "limit": 10000})
    assert res.status_code == 200 and "cursor" in res.json
    before = snapshot(r)
    for bad in (
        {"items": names, "cursor": 3},
        {"pattern": "*", "limit": 10001},
        {},
        {"items": [url(1)] * 10001},
        {"items": names, "pattern": "*"},
    ):
        res = post(bad)
        assert res.status_code == 400 and res.text.count("\n") == 1, res.text
    assert snapshot(r) == before
    entries = audit.read(r, P)["entries"]
    # Newest first: the two redo calls, each once, over the setup's own records.
    assert [e["action"] for e in entries] == ["items.redo", "items.redo", "items.add", "project.create"]
    assert entries[1]["detail"]["items"] == 5 and entries[1]["detail"]["queue"] == "secondary"
    assert entries[0]["detail"]["pattern"] == "*n=1*"
    assert_each_once(r, names)


def test_cli_redo_by_file_names_and_pattern(redis_url, engine, r, project, tmp_path, ctx):
    names = [url(i) for i in range(30)] + [long_url(i) for i in range(3)]
    item_verbs.add(ctx, P, names)
    finish(engine, names)
    listing = tmp_path / "redo.txt"
    listing.write_text("\n".join(names[:10]) + "\n\n")
    runner = CliRunner()

    def cli(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args])

    res = cli("items", "redo", P, "--file", str(listing), long_url(0), "--queue", "todo", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["requeued"] == 11 and r.scard(K.todo) == 11
    res = cli("items", "redo", P, "--pattern", "https://www.example.com/long/*", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["requeued"] == 2
    assert cli("items", "redo", P).exit_code == 2
    assert cli("items", "redo", P, "x", "--pattern", "*").exit_code == 2
    assert cli("items", "redo", "nope", "x").exit_code == 1
    entries = audit.read(r, P)["entries"]
    # Newest first: the two redo calls, each once, over the setup's own records.
    assert [e["action"] for e in entries] == ["items.redo", "items.redo", "items.add", "project.create"]
    assert entries[1]["actor"] == audit.CLI_ACTOR and entries[1]["detail"]["requeued"] == 11
    assert items_done(r) == r.scard(K.done) == len(names) - 13
    assert_each_once(r, names)


def test_redo_pages_while_warriors_claim_and_finish_keep_every_item_in_one_place(r, project, redis_url, ctx):
    import threading

    from tracker_core.items.engine import Engine

    names = [url(i) for i in range(2000)]
    item_verbs.add(ctx, P, names)
    stop = threading.Event()
    errors = []

    def warrior(name):
        engine = Engine(redis_url)
        try:
            while not stop.is_set():
                status, claimed = engine.claim(P, name, "10.0.0.9", 20)
                if status == 200 and claimed:
                    engine.done(P, name, "1", claimed, ["example.com", 1], "")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=warrior, args=(f"w{n}",)) for n in range(3)]
    for t in threads:
        t.start()
    redone = 0
    try:
        for _ in range(20):
            cursor = 0
            while True:
                page = item_verbs.redo(ctx, P, pattern="*", cursor=cursor, limit=200, queue="todo")
                redone, cursor = redone + page["requeued"], page["cursor"]
                if cursor == 0:
                    break
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors and redone > 0
    assert items_done(r) == r.scard(K.done)
    assert int(r.hget(K.stats, "items_redone")) == redone
    assert_each_once(r, names)


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
