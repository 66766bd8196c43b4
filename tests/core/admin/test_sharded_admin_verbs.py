"""The admin verbs over items on a sharded project (docs/sharding.md): counts and samples over
every shard, moves, redo, clears, releases and dead items acting on each item's own shard (one
script call per shard), pages that go shard after shard with "SHARD:CURSOR" cursors, and
lookups routed to the item's shard. Names are URL-shaped (slashes, ?, %, #, spaces)."""

from __future__ import annotations

import html
import json
import re
import time
import urllib.parse

import pytest
from click.testing import CliRunner
from falcon import testing

from tracker_api.admin.pages import csrf_for, paging
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_core.access import tokens
from tracker_core.admin import (
    census_verbs,
    claim_verbs,
    dead_verbs,
    item_verbs,
    limit_verbs,
    project_verbs,
)
from tracker_core.admin.errors import BadInput
from tracker_core.maintainer import maintenance
from tracker_core.project.shard_layout import ShardLayout

P = "shardverbs"
URLS = [f"https://example.org/a b/{i}?q=%20x&n={i}#frag {i}" for i in range(45)]
SHARD_CURSOR = re.compile(r"[0-2]:[0-9]+\Z")


@pytest.fixture
def layout(admin) -> ShardLayout:
    project_verbs.create(admin, P, shards=3)
    return admin.layout(P)


@pytest.fixture
def queued(admin, layout):
    """Every URL in todo, on its own shard (each shard has some)."""
    item_verbs.add(admin, P, URLS)
    assert {layout.shard_of(u) for u in URLS} == {0, 1, 2}
    return URLS


def on_shards(r, layout: ShardLayout, key_of) -> list[set[str]]:
    """The members of one set per shard: KEY_OF(shard's keys)."""
    return [set(r.smembers(key_of(k))) for k in layout.keys]


def by_shard(layout: ShardLayout, names) -> list[set[str]]:
    """NAMES grouped as they should lie: shard I's in place I."""
    return [{n for n in names if layout.shard_of(n) == i} for i in range(layout.count)]


def every_page(verb, counted: str) -> tuple[int, list]:
    """Run VERB(cursor) page after page: (total of COUNTED, the cursors returned)."""
    total, cursor, cursors = 0, 0, []
    while True:
        page = verb(cursor)
        total += page[counted] if isinstance(page[counted], int) else len(page[counted])
        cursor = page["cursor"]
        cursors.append(cursor)
        if cursor == 0:
            return total, cursors
        assert len(cursors) < 500


def all_rows(verb, field: str) -> list:
    """The rows of FIELD of every page of VERB(cursor)."""
    rows = []

    def page(cursor):
        found = verb(cursor)
        rows.extend(found[field])
        return found

    every_page(page, field)
    return rows


def claim_all(engine, who=("alice", "10.0.0.1"), project=P) -> list[str]:
    got = []
    while True:
        code, names = engine.claim(project, who[0], who[1], 10)
        if code != 200:
            return got
        got += names


def claim_only(engine, names, who=("alice", "10.0.0.1")) -> list[str]:
    """WHO claims NAMES (every item queued is claimed, the others released again)."""
    got = claim_all(engine, who)
    assert set(names) <= set(got)
    engine.release(P, who[0], [n for n in got if n not in names])
    return list(names)


# -- counts, samples, clear ---------------------------------------------------------------------


def test_count_and_sample_cover_every_shard(admin, layout, queued, r):
    assert item_verbs.count(admin, P, "todo") == {"queue": "todo", "count": len(URLS)}
    assert [r.scard(k.todo) for k in layout.keys] == [len(s) for s in by_shard(layout, URLS)]
    sample = item_verbs.sample(admin, P, "todo", 1000)["items"]
    assert sorted(sample) == sorted(URLS)  # all of them, each once
    few = item_verbs.sample(admin, P, "todo", 10)["items"]
    assert len(few) == len(set(few)) == 10 and set(few) <= set(URLS)
    # Over many samples every shard's items are drawn.
    drawn = {n for _ in range(20) for n in item_verbs.sample(admin, P, "todo", 5)["items"]}
    assert {layout.shard_of(n) for n in drawn} == {0, 1, 2}


def test_clear_empties_the_queue_on_every_shard(admin, layout, queued, r):
    assert item_verbs.clear(admin, P, "todo") == {"dropped": len(URLS)}
    assert [r.scard(k.todo) for k in layout.keys] == [0, 0, 0]
    assert item_verbs.count(admin, P, "todo")["count"] == 0


# -- moves, paged shard after shard -------------------------------------------------------------


def test_move_pages_over_every_shard_with_shard_cursors(admin, layout, queued, r):
    moved, cursors = every_page(
        lambda c: item_verbs.move(admin, P, "todo", "secondary", cursor=c, limit=4), "moved"
    )
    assert moved == len(URLS)
    assert cursors[-1] == 0 and all(SHARD_CURSOR.match(c) for c in cursors[:-1])
    assert {c.split(":")[0] for c in cursors[:-1]} >= {"1", "2"}  # it went on to the later shards
    assert on_shards(r, layout, lambda k: k.secondary) == by_shard(layout, URLS)
    assert on_shards(r, layout, lambda k: k.todo) == [set(), set(), set()]


def test_move_all_into_a_downloader_queue_keeps_each_item_on_its_shard(admin, layout, queued, r):
    wanted = [u for u in URLS if "#frag 1" in u]  # 1, 10..19
    assert item_verbs.move_all(admin, P, "todo", "downloader:alice", pattern="*#frag 1*") == {
        "moved": len(wanted)
    }
    assert on_shards(r, layout, lambda k: k.downloader_queue("alice")) == by_shard(layout, wanted)
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, set(URLS) - set(wanted))
    assert census_verbs.status(admin, P)["queues"]["downloader"] == {"alice": len(wanted)}


def test_a_move_into_a_shared_queue_holds_what_a_limit_matches_on_each_shard(admin, layout, queued, r):
    limit_verbs.add(admin, P, "slow", "regex:#frag 2", "1/m", reclassify=False)
    item_verbs.move_all(admin, P, "todo", "redo")
    held = {u for u in URLS if "#frag 2" in u}
    assert on_shards(r, layout, lambda k: k.redo) == by_shard(layout, set(URLS) - held)
    assert sum(r.zcard(k.limited) + r.scard(k.limited_in) for k in layout.keys) == len(held)
    assert {layout.shard_of(u) for u in held} == {0, 1, 2}
    for index, k in enumerate(layout.keys):
        assert r.zcard(k.limited) + r.scard(k.limited_in) == len(by_shard(layout, held)[index])


def test_reclassify_holds_what_a_new_limit_matches_on_every_shard(admin, layout, queued, r):
    limit_verbs.add(admin, P, "slow", "regex:#frag 3", "1/m", reclassify=False)
    held = {u for u in URLS if "#frag 3" in u}
    assert limit_verbs.reclassify(admin, P) == {"held": len(held)}
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, set(URLS) - held)
    assert [r.zcard(k.limited) for k in layout.keys] == [len(s) for s in by_shard(layout, held)]


def test_a_sharded_cursor_past_the_shards_or_malformed_is_refused(admin, layout, queued, r):
    for bad in ("3:0", "x", "1:", "-1", "0:-1", 1.5, None):
        with pytest.raises(BadInput, match="'cursor'"):
            item_verbs.move(admin, P, "todo", "secondary", cursor=bad)
    assert r.scard(layout.keys[0].secondary) == 0
    # A cursor of a later shard starts there: shard 0 is left alone.
    item_verbs.move(admin, P, "todo", "secondary", cursor="2:0", limit=1000)
    assert on_shards(r, layout, lambda k: k.secondary) == [set(), set(), by_shard(layout, URLS)[2]]


def test_a_one_shard_project_keeps_integer_cursors(admin, r):
    project_verbs.create(admin, "single")
    item_verbs.add(admin, "single", [f"n{i}" for i in range(300)])
    page = item_verbs.move(admin, "single", "todo", "secondary", limit=10)
    assert type(page["cursor"]) is int and page["cursor"] != 0
    with pytest.raises(BadInput, match="'cursor'"):
        item_verbs.move(admin, "single", "todo", "secondary", cursor="1:0")
    again = item_verbs.move(admin, "single", "todo", "secondary", cursor=f"0:{page['cursor']}", limit=1000)
    assert type(again["cursor"]) is int


# -- redo ---------------------------------------------------------------------------------------


@pytest.fixture
def all_done(admin, engine, queued, layout, r):
    names = claim_all(engine)
    assert sorted(names) == sorted(URLS)
    assert engine.done(P, "alice", "v1", names, ["example.org", 100], "{}").new == len(URLS)
    assert on_shards(r, layout, lambda k: k.done) == by_shard(layout, URLS)
    return names


def test_redo_by_names_requeues_each_on_its_own_shard(admin, layout, all_done, r):
    some = URLS[::2]
    result = item_verbs.redo(admin, P, names=some + ["https://never.example/x y"])
    assert (result["requeued"], result["from_done"]) == (len(some), len(some))
    assert result["skipped_by_reason"]["not_seen"] == 1
    assert on_shards(r, layout, lambda k: k.redo) == by_shard(layout, some)
    assert on_shards(r, layout, lambda k: k.done) == by_shard(layout, set(URLS) - set(some))


def test_redo_by_pattern_pages_over_every_shard(admin, layout, all_done, r):
    requeued, cursors = every_page(
        lambda c: item_verbs.redo(admin, P, pattern="*", cursor=c, limit=5), "requeued"
    )
    assert requeued == len(URLS) and all(SHARD_CURSOR.match(c) for c in cursors[:-1])
    assert on_shards(r, layout, lambda k: k.redo) == by_shard(layout, URLS)
    assert on_shards(r, layout, lambda k: k.done) == [set(), set(), set()]


def test_redo_all_by_pattern_into_secondary(admin, layout, all_done, r):
    wanted = [u for u in URLS if u.endswith(("#frag 3", "#frag 4"))]
    total = item_verbs.redo_all(admin, P, pattern="*#frag [34]", queue="secondary")
    assert (total["requeued"], total["skipped"]) == (2, 0) == (len(wanted), 0)
    assert on_shards(r, layout, lambda k: k.secondary) == by_shard(layout, wanted)
    many = item_verbs.redo_all(admin, P, names=URLS)
    assert many["requeued"] == len(URLS) - 2 and many["skipped_by_reason"]["queued"] == 2
    assert on_shards(r, layout, lambda k: k.redo) == by_shard(layout, set(URLS) - set(wanted))


# -- claims -------------------------------------------------------------------------------------


def test_list_claims_pages_over_every_shard(admin, engine, layout, queued):
    claimed = claim_all(engine)
    rows = all_rows(lambda c: claim_verbs.list_claims(admin, P, cursor=c, count=4), "claims")
    assert sorted(row["item"] for row in rows) == sorted(claimed) == sorted(URLS)
    assert {row["downloader"] for row in rows} == {"alice"}


def test_release_by_downloader_on_every_shard(admin, engine, layout, queued, r):
    alice = claim_only(engine, URLS[:20])
    bob = claim_all(engine, ("bob", "10.0.0.2"))
    assert sorted(alice + bob) == sorted(URLS)
    assert {layout.shard_of(n) for n in alice} == {layout.shard_of(n) for n in bob} == {0, 1, 2}
    released, cursors = every_page(
        lambda c: claim_verbs.release(admin, P, downloader="alice", cursor=c, limit=3), "released"
    )
    assert released == len(alice) and all(SHARD_CURSOR.match(c) for c in cursors[:-1])
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, alice)
    assert [set(r.zrange(k.out, 0, -1)) for k in layout.keys] == by_shard(layout, bob)


def test_release_by_age_and_by_pattern_on_every_shard(admin, engine, clock, layout, queued, r):
    clock.now = time.time() - 3600  # the age is measured against Redis's clock
    old = claim_only(engine, URLS[:30])
    clock.advance(3300)
    new = claim_all(engine, ("bob", "10.0.0.2"))
    assert sorted(old + new) == sorted(URLS)
    assert claim_verbs.release_all(admin, P, older_than_s=1800) == {"released": len(old)}
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, old)
    assert [set(r.hkeys(k.claims)) for k in layout.keys] == by_shard(layout, new)
    mine = [n for n in new if "#frag 4" in n]
    assert mine and claim_verbs.release_all(admin, P, pattern="*#frag 4*") == {"released": len(mine)}
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, old + mine)


# -- dead items ---------------------------------------------------------------------------------


def make_dead(admin, engine, clock, project=P) -> None:
    """Every queued item of PROJECT reclaimed once too often: dead, last held by bob."""
    project_verbs.set_settings(admin, project, {"reclaim_ttl_s": "1", "max_reclaims": "1"})
    assert sorted(claim_all(engine, project=project)) == sorted(URLS)
    clock.advance(1.5)
    assert sorted(claim_all(engine, ("bob", "10.0.0.2"), project)) == sorted(URLS)
    clock.advance(2.5)
    for _ in range(10):  # each claim passes over due reclaims on the shards it visits
        claim_all(engine, ("carol", "10.0.0.3"), project)


@pytest.fixture
def all_dead(admin, engine, clock, layout, queued, r):
    make_dead(admin, engine, clock)
    assert [set(r.hkeys(k.dead)) for k in layout.keys] == by_shard(layout, URLS)
    return URLS


def test_list_dead_pages_over_every_shard(admin, layout, all_dead):
    rows = all_rows(lambda c: dead_verbs.list_dead(admin, P, cursor=c, count=4), "dead")
    assert sorted(row["item"] for row in rows) == sorted(URLS)
    assert {row["last_downloader"] for row in rows} == {"bob"}


def test_requeue_by_names_goes_back_to_the_item_s_own_shard(admin, layout, all_dead, r):
    some = URLS[1::3]
    assert dead_verbs.requeue(admin, P, some + ["https://never.example/"], "secondary") == {
        "requeued": len(some)
    }
    assert on_shards(r, layout, lambda k: k.secondary) == by_shard(layout, some)
    assert [set(r.hkeys(k.dead)) for k in layout.keys] == by_shard(layout, set(URLS) - set(some))


def test_requeue_all_pages_over_every_shard(admin, layout, all_dead, r):
    requeued, cursors = every_page(lambda c: dead_verbs.requeue_page(admin, P, cursor=c, limit=4), "requeued")
    assert requeued == len(URLS) and all(SHARD_CURSOR.match(c) for c in cursors[:-1])
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, URLS)
    assert [r.hlen(k.dead) for k in layout.keys] == [0, 0, 0]
    assert census_verbs.status(admin, P)["dead"] == 0


# -- where an item is ---------------------------------------------------------------------------


def test_status_and_story_ask_the_item_s_own_shard(admin, engine, layout, queued, tmp_path):
    # Two names of each shard in each place.
    per_shard = [[u for u in URLS if layout.shard_of(u) == i] for i in range(3)]
    done, out, todo = ([n for names in per_shard for n in names[at : at + 2]] for at in (0, 2, 4))
    claim_only(engine, done + out)
    assert engine.done(P, "alice", "v1", done, ["example.org", 30], "{}").new == len(done)
    names = done + out + todo
    for group in (done, out, todo):
        assert {layout.shard_of(n) for n in group} == {0, 1, 2}
    places = {p["item"]: p for p in item_verbs.status(admin, P, names)}
    assert {n: places[n]["status"] for n in names} == {
        **dict.fromkeys(done, "done"),
        **dict.fromkeys(out, "out"),
        **dict.fromkeys(todo, "todo"),
    }
    assert {places[n]["downloader"] for n in out} == {"alice"}
    stories = item_verbs.story(admin, P, tmp_path, names)
    assert [s["item"] for s in stories] == names  # in the order asked
    assert [s["status"] for s in stories] == [places[n]["status"] for n in names]
    assert {s["ip"] for s in stories if s["status"] == "out"} == {"10.0.0.1"}
    assert [len(s["done"]) for s in stories[: len(done)]] == [1] * len(done)  # each shard's done log


def test_the_story_reads_each_shard_s_archived_done_log(admin, engine, r, layout, queued, tmp_path):
    # Each shard archives its own done log under its own folder (DIR/P.I for shard I > 0): the
    # story of a done item finds its entry in its shard's files.
    per_shard = [next(u for u in URLS if layout.shard_of(u) == i) for i in range(3)]
    claim_only(engine, per_shard)
    assert engine.done(P, "alice", "v1", per_shard, ["example.org", 30], "{}").new == 3
    project_verbs.set_settings(admin, P, {"log_maxlen": "0"})
    report = maintenance.Maintainer(r, tmp_path, "node-a", stats_upkeep=False).pass_once()[P]
    assert report["log_archived"] == 3, report
    assert all(r.xlen(k.log) == 0 for k in layout.keys)  # every entry now only on disk
    stories = item_verbs.story(admin, P, tmp_path, per_shard)
    assert [[d["downloader"] for d in s["done"]] for s in stories] == [["alice"]] * 3


def test_item_status_reads_each_shard_s_own_downloader_queues(admin, engine, layout, queued):
    # An item of shard 0 in alice's queue, one of shard 1 in bob's: each shard knows one
    # downloader, a different one, and each item is looked for in its own shard's list.
    first = next(u for u in URLS if layout.shard_of(u) == 0)
    second = next(u for u in URLS if layout.shard_of(u) == 1)
    item_verbs.move_all(admin, P, "todo", "downloader:alice", pattern=first)
    item_verbs.move_all(admin, P, "todo", "downloader:bob", pattern=second)
    places = item_verbs.status(admin, P, [first, second])
    assert [p["queue"] for p in places] == ["downloader:alice", "downloader:bob"]
    assert [engine.item_place(P, n)["queue"] for n in (first, second)] == [
        "downloader:alice",
        "downloader:bob",
    ]


# -- the faces pass a sharded project's cursors through ------------------------------------------


def test_the_admin_api_and_cli_page_with_shard_cursors(admin, engine, layout, queued, r, redis_url):
    web = testing.TestClient(create_app(engine))
    headers = {"Authorization": f"Bearer {tokens.create(admin.conn, P, 'ops')[0]}"}
    base = f"/api/admin/projects/{P}"
    moved, cursor = 0, 0
    while True:
        body = {"to": "secondary", "cursor": cursor, "limit": 4}
        res = web.simulate_post(f"{base}/queues/todo/move", headers=headers, json=body)
        assert res.status_code == 200, res.text
        moved, cursor = moved + res.json["moved"], res.json["cursor"]
        if cursor == 0:
            break
        assert SHARD_CURSOR.match(cursor)
    assert moved == len(URLS) and on_shards(r, layout, lambda k: k.secondary) == by_shard(layout, URLS)
    claim_all(engine)
    seen, cursor = set(), 0
    while True:
        res = web.simulate_get(
            f"{base}/claims", headers=headers, params={"count": "4", "cursor": str(cursor)}
        )
        assert res.status_code == 200, res.text
        seen |= {row["item"] for row in res.json["claims"]}
        cursor = res.json["cursor"]
        if cursor == 0:
            break
    assert seen == set(URLS)
    for bad in ("3:0", "x:1"):
        assert web.simulate_get(f"{base}/claims", headers=headers, params={"cursor": bad}).status_code == 400
        res = web.simulate_post(
            f"{base}/queues/secondary/move", headers=headers, json={"to": "todo", "cursor": bad}
        )
        assert res.status_code == 400
    # The CLI's --cursor takes one too: shard 2's claims alone.
    out = CliRunner().invoke(
        main, ["--redis-url", redis_url, "claims", "list", P, "--cursor", "2:0", "--json"]
    )
    assert out.exit_code == 0, out.output
    listed = {row["item"] for row in json.loads(out.output)["claims"]}
    assert listed == by_shard(layout, URLS)[2]


# -- a project that gained shards: named items found where they were added ----------------------


@pytest.fixture
def grown(admin) -> ShardLayout:
    """Two shards when URLS were added, three now: each URL lives on crc32 mod 2."""
    project_verbs.create(admin, "grown", shards=2)
    item_verbs.add(admin, "grown", URLS)
    project_verbs.grow(admin, "grown", 3)
    layout = admin.layout("grown")
    assert any(layout.shard_of(u) != old_shard(u) for u in URLS)
    return layout


def old_shard(name: str) -> int:
    return ShardLayout("grown", ("{a}", "{b}")).shard_of(name)


def added_before(layout: ShardLayout, names) -> list[set[str]]:
    return [{n for n in names if old_shard(n) == i} for i in range(layout.count)]


def test_a_grown_project_s_status_and_story_find_items_where_they_were_added(admin, grown, tmp_path):
    assert {p["status"] for p in item_verbs.status(admin, "grown", URLS)} == {"todo"}
    assert {s["status"] for s in item_verbs.story(admin, "grown", tmp_path, URLS[:20])} == {"todo"}
    assert item_verbs.status(admin, "grown", ["https://never.example/"])[0]["status"] is None


def test_a_grown_project_s_redo_and_requeue_by_names_act_where_the_items_are(admin, engine, clock, grown, r):
    claimed = claim_all(engine, project="grown")
    assert engine.done("grown", "alice", "v1", claimed, ["example.org", 45], "{}").new == len(URLS)
    assert item_verbs.redo(admin, "grown", names=URLS)["from_done"] == len(URLS)
    assert on_shards(r, grown, lambda k: k.redo) == added_before(grown, URLS)
    assert on_shards(r, grown, lambda k: k.done) == [set(), set(), set()]
    item_verbs.move_all(admin, "grown", "redo", "todo")
    make_dead(admin, engine, clock, "grown")
    assert dead_verbs.requeue(admin, "grown", URLS, "secondary") == {"requeued": len(URLS)}
    assert on_shards(r, grown, lambda k: k.secondary) == added_before(grown, URLS)
    assert [r.hlen(k.dead) for k in grown.keys] == [0, 0, 0]


def test_a_grown_project_s_redo_of_seen_names_acts_where_they_were_added(admin, grown, r):
    kept = URLS[:5]  # stay queued (in secondary) on the shard they were added to
    cleared = URLS[5:]  # seen by their filters, then cleared: nowhere
    assert any(grown.shard_of(u) != old_shard(u) for u in cleared)
    item_verbs.move_all(admin, "grown", "todo", "secondary", pattern="*#frag [0-4]")
    item_verbs.clear(admin, "grown", "todo")
    result = item_verbs.redo(admin, "grown", names=URLS)
    assert result["from_seen"] == len(cleared) and result["skipped"] == len(kept)
    assert on_shards(r, grown, lambda k: k.redo) == added_before(grown, cleared)
    assert on_shards(r, grown, lambda k: k.secondary) == added_before(grown, kept)  # not queued twice


def test_the_admin_pages_page_with_shard_cursors(admin, engine, layout, queued, r, monkeypatch):
    web = testing.TestClient(create_app(engine))
    token = tokens.create(admin.conn, P, "ops")[0]
    cookie = {"Cookie": f"tracker_admin={token}"}
    claim_all(engine)
    listed = web.simulate_get(f"/admin/{P}/claims", headers=cookie, params={"cursor": "2:0"})
    assert listed.status_code == 200
    shown = {u for u in URLS if html.escape(u) in listed.text}
    assert shown == by_shard(layout, URLS)[2]
    assert web.simulate_get(f"/admin/{P}/claims", headers=cookie, params={"cursor": "7:0"}).status_code == 400
    # A release stopped at its budget offers to continue from a shard cursor, and does.
    monkeypatch.setattr(paging, "RELEASE_PAGES", 1)
    form = {"csrf": csrf_for(token), "downloader": "alice", "older_than_s": "", "pattern": ""}
    headers = {**cookie, "Content-Type": "application/x-www-form-urlencoded"}
    res = web.simulate_post(f"/admin/{P}/release", body=urllib.parse.urlencode(form), headers=headers)
    assert res.status_code == 303
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(res.headers["location"]).query)
    assert SHARD_CURSOR.match(query["cursor"][0])
    again = {**form, "cursor": query["cursor"][0]}
    monkeypatch.setattr(paging, "RELEASE_PAGES", 20)
    res = web.simulate_post(f"/admin/{P}/release", body=urllib.parse.urlencode(again), headers=headers)
    assert res.status_code == 303 and "cursor" not in urllib.parse.parse_qs(
        urllib.parse.urlsplit(res.headers["location"]).query
    )
    assert sum(r.zcard(k.out) for k in layout.keys) == 0
    assert on_shards(r, layout, lambda k: k.todo) == by_shard(layout, URLS)
