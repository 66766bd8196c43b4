"""Item status answers for every place an item can be, URL names included, at bounded cost.

GET /P/items/ITEM.json keeps the old tracker's keys (status, downloader: the same values for
todo, out and done) and says more: the queue (and the limit holding it), the claim count, dead
and offloaded items, and "maybe" for a name found nowhere that a segment file may hold.
"""

import json
import time
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from support.item_status import NOWHERE, place
from tracker_api.cli import main
from tracker_core import scripts
from tracker_core.admin import item_story, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items import item_status
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import staging
from tracker_core.offload.lease import Lease

P = "where"
K = ProjectKeys(P)
URLS = [
    "https://example.org/a b/c?d=%20e&f=1#frag",
    "http://user:pw@example.org:8080/%E2%98%BA/?q=a%2Fb#x y",
    "https://example.org/p?" + "k=%41%25&" * 300 + "#end",  # about 2.7 KB
    "https://example.org/" + "seg%20ment/" * 360,  # about 4 KB
]
T0_MS = 1_700_000_000_000  # the clock fixture's start


def over_http(web, name: str, project: str = P):
    res = web.simulate_get(f"/{project}/items/{quote(name, safe='')}.json")
    assert res.status_code == 200, res.text
    return res.json


def put_everywhere(engine, r, clock, ctx) -> dict:
    """Put URL names in every place an item can be; return {name: expected answer}."""
    project_verbs.create(ctx, P)
    project_verbs.set_settings(ctx, P, {"reclaim_ttl_s": "60", "max_reclaims": "1"})
    expected = {}
    # Out: claimed once (alice), and reclaimed once (claimed by bob the second time).
    item_verbs.add(ctx, P, [u + "&out" for u in URLS])
    status, out = engine.claim(P, "alice", "10.0.0.1", len(URLS))
    assert status == 200
    clock.advance(61)
    status, again = engine.claim(P, "bob", "10.0.0.2", 1)  # queues empty: a reclaim
    assert status == 200 and again[0] in out
    expected.update({n: place(status="out", downloader="alice", claims=1, since=T0_MS) for n in out})
    expected[again[0]] = place(status="out", downloader="bob", claims=2, since=T0_MS + 61_000)
    # Dead: that reclaimed item comes due again, its claims now past max_reclaims.
    clock.advance(121)
    dead = again[0]
    status, _ = engine.claim(P, "carol", "10.0.0.3", len(URLS))  # the others reclaimed
    assert r.hexists(K.dead, dead)
    expected[dead] = place(
        status="dead", downloader="bob", claims=2, reason="reclaimed too often", since=T0_MS + 182_000
    )
    expected.update(
        {
            n: place(status="out", downloader="carol", claims=2, since=T0_MS + 182_000)
            for n in out
            if n != dead
        }
    )
    # Done.
    item_verbs.add(ctx, P, [u + "&done" for u in URLS])
    status, done = engine.claim(P, "alice", "10.0.0.1", len(URLS))
    assert engine.done(P, "alice", "1", done, [], "id").new == len(URLS)
    expected.update({n: place(status="done") for n in done})
    # Each shared queue and a downloader's own queue.
    for queue in ("todo", "backfeed", "secondary", "redo", "downloader:dave"):
        names = [f"{u}&{queue}" for u in URLS]
        item_verbs.add(ctx, P, names, queue=queue)
        expected.update({n: place(status="todo", queue=queue) for n in names})
    # Held by a limit, in its sub-queue and on the way in.
    limit_verbs.add(ctx, P, "held", "regex:&held", "1/m")
    held = [u + "&held" for u in URLS]
    item_verbs.add(ctx, P, held)
    arriving = [u + "&held-arriving" for u in URLS]
    r.sadd(K.limited_in, *[f"held\0{n}" for n in arriving])
    expected.update({n: place(status="todo", queue="limited", limit="held") for n in held + arriving})
    # Unknown.
    expected.update({u + "&never": place() for u in URLS})
    return expected


def test_every_place_is_answered_for_url_names(engine, r, clock, web, ctx):
    expected = put_everywhere(engine, r, clock, ctx)
    assert max(len(n) for n in expected) > 3980
    assert {n: engine.item_place(P, n) for n in expected} == expected
    for name, answer in expected.items():
        assert over_http(web, name) == answer, name
        # The old tracker's two keys, as before.
        assert engine.item_status(P, name) == (answer["status"], answer["downloader"])


@pytest.fixture
def lease(r):
    held = Lease(r, K, "node-a")
    assert held.take()
    return held


def test_offloaded_items_and_maybe_offloaded(engine, r, web, tmp_path, lease, ctx):
    project_verbs.create(ctx, P)
    names = [f"{URLS[0]}&n={i}" for i in range(30)]
    item_verbs.add(ctx, P, names, queue="backfeed")
    assert over_http(web, URLS[0] + "&never") == NOWHERE  # no segment files: not maybe
    # On its way to a segment file (staged by a maintainer): offloaded, from its queue.
    number, staged = scripts.offload_stage(
        r, K, holder=lease.holder, count=10, source="backfeed", source_key=K.backfeed
    )
    assert len(staged) == 10
    for name in staged:
        assert over_http(web, name) == place(status="offloaded", queue="backfeed", segment=number)
    staging.recover(r, K, tmp_path, lease)
    lease.release()
    # In a registered segment file: the files are not opened, so "maybe".
    project_verbs.set_settings(
        ctx, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}
    )
    assert maintenance.maintain_project(r, P, tmp_path)["offloaded"] == 20
    in_files = set(names) - r.smembers(K.backfeed)
    assert len(in_files) == 20
    for name in list(in_files)[:3] + [URLS[0] + "&never"]:
        assert over_http(web, name) == place(maybe=["offloaded"])
    for name in r.smembers(K.backfeed):
        assert over_http(web, name) == place(status="todo", queue="backfeed")


def test_a_downloader_queue_made_a_moment_ago_is_found_at_once(engine, r, ctx):
    project_verbs.create(ctx, P)
    assert engine.item_place(P, URLS[1]) == NOWHERE  # caches "no own queues"
    item_verbs.add(ctx, P, [URLS[1]], queue="downloader:erin")
    assert engine.item_place(P, URLS[1]) == place(status="todo", queue="downloader:erin")


def test_past_the_cap_of_own_queues_looked_in_a_name_found_nowhere_says_maybe(engine, r, monkeypatch, ctx):
    monkeypatch.setattr(item_status, "OWN_QUEUES_CHECKED", 3)
    project_verbs.create(ctx, P)
    for i in range(5):
        item_verbs.add(ctx, P, [f"{URLS[0]}&own={i}"], queue=f"downloader:owner{i}")
    engine = Engine(engine.redis_url)
    answers = [engine.item_place(P, f"{URLS[0]}&own={i}") for i in range(5)]
    found = [a for a in answers if a["status"] == "todo"]
    assert len(found) == 3
    assert all(a == place(maybe=["downloader_queue"]) for a in answers if a not in found)
    assert engine.item_place(P, "never") == place(maybe=["downloader_queue"])


def test_an_unknown_name_costs_bounded_lookups_with_many_limits_and_own_queues(engine, r, web, ctx):
    project_verbs.create(ctx, P)
    for i in range(50):
        limit_verbs.add(ctx, P, f"lim{i}", f"regex:^https://l{i}\\.example/", "1/m")
    pipe = r.pipeline(transaction=False)
    for i in range(item_status.OWN_QUEUES_CHECKED):
        pipe.sadd(K.downloader_queue(f"own{i:04d}"), "x")
        pipe.sadd(K.downloader_queues, f"own{i:04d}")
    pipe.execute()
    hostile = "https://l1.example/" + "ab/" * 1300 + "!"
    over_http(web, "warm-up")
    r.config_resetstat()
    start = time.perf_counter()
    assert over_http(web, hostile) == NOWHERE
    took = time.perf_counter() - start
    calls = {name: int(stats["calls"]) for name, stats in r.info("commandstats").items()}
    # One script call; the owners list was read once (cached for a second).
    assert calls.get("cmdstat_evalsha", 0) + calls.get("cmdstat_eval", 0) == 1
    # Inside it, one exact lookup per shared queue and per own queue, no scan of any set.
    assert calls.get("cmdstat_sismember", 0) <= 4 + item_status.OWN_QUEUES_CHECKED + 2
    assert not any(c in calls for c in ("cmdstat_smembers", "cmdstat_sscan", "cmdstat_hgetall"))
    assert took < 0.5


def test_unknown_project_and_bad_paths(engine, web, ctx):
    assert engine.item_place("nope", "x") is None
    assert web.simulate_get("/nope/items/x.json").status_code == 404
    project_verbs.create(ctx, P)
    assert web.simulate_get(f"/{P}/items/x").status_code == 404
    assert web.simulate_get(f"/{P}/items/{'x' * 4097}.json").status_code == 400
    assert over_http(web, "x" * 4096) == NOWHERE


# -- tracker items status ------------------------------------------------------------------------


@pytest.fixture
def cli(redis_url):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args])

    return invoke


def test_cli_items_status_json_and_table(engine, r, clock, cli, ctx):
    expected = put_everywhere(engine, r, clock, ctx)
    names = list(expected)
    res = cli("items", "status", P, *names, "--json")
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.output.splitlines()]
    assert [line.pop("item") for line in lines] == names
    # The public answer's keys as GET answers them, and what only admins see besides.
    assert [{key: line[key] for key in NOWHERE} for line in lines] == [expected[n] for n in names]
    assert all(set(line) == set(NOWHERE) | set(item_story.ADMIN_FIELDS) for line in lines)
    res = cli("items", "status", P, URLS[0] + "&todo", URLS[0] + "&held", URLS[0] + "&never")
    assert res.exit_code == 0, res.output
    rows = res.output.splitlines()
    assert rows[0].split() == ["STATUS", "DETAIL", "DOWNLOADER", "CLAIMS", "DONE", "ITEM"]
    assert rows[1].split()[:2] == ["todo", "todo"] and rows[1].endswith(URLS[0] + "&todo")
    assert rows[2].split()[:2] == ["todo", "limited:held"]
    assert rows[3].split()[0] == "-" and rows[3].endswith(URLS[0] + "&never")
    # --public: exactly what GET /P/items/ITEM.json answers.
    res = cli("items", "status", P, *names, "--json", "--public")
    assert res.exit_code == 0, res.output
    assert [json.loads(line) for line in res.output.splitlines()] == [
        {"item": n, **expected[n]} for n in names
    ]


def test_cli_items_status_refuses_an_unknown_project_and_bad_names(cli, ctx):
    res = cli("items", "status", "nope", "x")
    assert res.exit_code == 1 and "unknown project" in res.output
    project_verbs.create(ctx, P)
    res = cli("items", "status", P, "x" * 4097)
    assert res.exit_code == 1 and "4096" in res.output
    assert cli("items", "status", P).exit_code == 2  # no name given


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
