"""A sharded project's figures read whole (docs/sharding.md): charts, uniques, top downloaders,
recent log and /metrics summed or merged over its shards; the maintainer's passes over every
shard (statistics upkeep, done log archive, shard shares); the done log exported in time order."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from tracker_api.app import create_app
from tracker_api.public.live import LiveFeed, ProjectWatcher
from tracker_core.admin import item_verbs, log_verbs, project_verbs
from tracker_core.figures import stats, stats_shards
from tracker_core.figures.stats import StatsReader
from tracker_core.maintainer import shard_passes
from tracker_core.maintainer.maintenance import Maintainer
from tracker_core.project.shard_layout import SHARE_FIELD
from tracker_core.scripts.constants import REFILL_WATCH_FIELD

P = "bigsite"
URLS = [f"https://example.org/page/{i}?q=a%20b&x={i}#frag" for i in range(90)]
PEOPLE = ("alice", "bob", "carol")


@pytest.fixture
def layout(admin):
    project_verbs.create(admin, P, shards=3)
    item_verbs.add(admin, P, URLS)
    return admin.layout(P)


def work(engine, clock, rounds=5, per_claim=3) -> dict[str, int]:
    """Each downloader claims and finishes PER_CLAIM items ROUNDS times; items done by each."""
    done = dict.fromkeys(PEOPLE, 0)
    for _ in range(rounds):
        for n, who in enumerate(PEOPLE):
            code, names = engine.claim(P, who, f"10.0.0.{n}", per_claim)
            assert code == 200 and len(names) == per_claim
            clock.advance(2)
            assert engine.done(P, who, "1", names, ["example.org", 100 * len(names)], "{}").new == per_claim
            done[who] += per_claim
    return done


def test_the_statistics_are_the_sum_of_every_shard(engine, clock, layout, r):
    done = work(engine, clock)
    total = sum(done.values())
    # Every shard holds a part of the counts: reading only one would miss the others.
    assert all(int(r.hget(k.stats, "items_done") or 0) < total for k in layout.keys)
    reader = StatsReader(engine.conn, engine.layout)
    now_ms = int(clock.now * 1000)
    snap = reader.snapshot(P, engine.counts(P), now_ms)
    assert sum(snap["charts"]["minute"]["items_done"]) == total
    assert sum(snap["charts"]["minute"]["bytes_done"]) == 100 * total
    assert sum(snap["charts"]["hour"]["items_done"]) == total
    assert snap["charts"]["hour"]["done_total"][-1] == total
    assert snap["charts"]["minute"]["backlog"][-1] == len(URLS) - total == snap["backlog"]
    assert snap["items_per_s"] > 0 and snap["rtt"]["count"] == total
    # Each client counted once, on the shard its own name picks; the shards' counts add up.
    assert snap["uniques"]["downloaders_day"] == 3 and snap["uniques"]["ips_day"] == 3
    # The top downloaders: each shard's point, added up, is the whole count.
    top = snap["charts"]["top_downloaders"]["series"]
    assert {name: series[-1] for name, series in top.items()} == done
    # The backlog is sampled once, on the first shard, as the whole project's.
    minute = now_ms // 60_000
    assert r.hget(layout.keys[0].minute(minute), "backlog") == str(len(URLS) - total)
    assert not any(r.hexists(k.minute(minute), "backlog") for k in layout.keys[1:])
    assert reader.downloader_total(P) == 3
    chart = reader.downloader_chart(P, "alice", now_ms)
    assert chart["items"] == done["alice"] and chart["bytes"] == 100 * done["alice"]
    assert chart["items_total"][-1] == done["alice"] and chart["items_total"][0] == 0


def test_the_recent_log_merges_every_shard_newest_first(engine, clock, layout):
    work(engine, clock, rounds=2)
    lines = StatsReader(engine.conn, engine.layout).recent_log(P, 100)
    assert sum(len(line["items"]) for line in lines) == 18
    ats = [line["at"] for line in lines]
    assert ats == sorted(ats, reverse=True)
    assert len(StatsReader(engine.conn, engine.layout).recent_log(P, 4)) == 4


def test_upkeep_rolls_every_shard_up_and_the_week_and_all_charts_keep_the_sum(engine, clock, layout, r):
    start_ms = int(clock.now * 1000)
    for k in layout.keys:  # created on the test's clock (Redis's own is another day)
        r.hset(k.settings, "created_ms", start_ms)
    done = work(engine, clock)
    total = sum(done.values())
    clock.advance(26 * 3600)  # the hours, then the day of the work, can be rolled up
    now_ms = int(clock.now * 1000)
    stats.upkeep(r, P, now_ms)
    hour = (now_ms - 26 * 3_600_000) // 3_600_000
    assert all(r.exists(k.hour(hour)) for k in layout.keys)
    assert all(r.hlen(k.days) >= 1 for k in layout.keys)
    reader = StatsReader(engine.conn, engine.layout)
    week = reader.snapshot(P, engine.counts(P), now_ms, "week")["charts"]["range"]
    assert sum(week["items_done"]) == total
    everything = reader.snapshot(P, engine.counts(P), now_ms, "all", start_ms)["charts"]["range"]
    assert sum(everything["items_done"]) == total and everything["done_total"][-1] == total


def test_days_add_up_over_shards_added_later_and_wait_for_a_shard_behind():
    first = {"100": "5 50 9 8 40", "101": "1 10 2 2 41", "102": "2 20 3 3 42"}
    grown = {"102": "4 40 5 5 -"}  # added on day 102
    behind = {"100": "1 1 1 1 -"}  # has not rolled day 101 up yet
    merged = stats_shards.merged_days([first, grown, behind])
    assert merged == {"100": "6 51 10 9 40"}
    assert stats_shards.merged_days([first, grown]) == {**first, "102": "6 60 8 8 42"}


def test_metrics_and_stats_json_answer_for_every_shard(engine, clock, layout):
    work(engine, clock, rounds=1)
    web = testing.TestClient(create_app(engine))
    text = web.simulate_get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    uniques = {
        (s.labels["kind"], s.labels["period"]): s.value
        for s in families["tracker_unique_visitors"].samples
        if s.labels["project"] == P
    }
    assert uniques[("downloaders", "day")] == 3
    backlog = [s.value for s in families["tracker_backlog_items"].samples if s.labels["project"] == P]
    assert backlog == [len(URLS) - 9]
    body = web.simulate_get(f"/{P}/stats.json").json
    assert (body["downloaders_total"], body["stats"]["uniques"]["downloaders_day"]) == (3, 3)
    assert sum(len(line["items"]) for line in body["recent_log"]) == 9
    assert sum(body["stats"]["charts"]["minute"]["items_done"]) == body["done"] == 9


# -- the maintainer's passes -------------------------------------------------------------------


def served(engine, clock, seconds: int) -> int:
    """Items one busy client gets in SECONDS (ten tries each tenth of a second)."""
    got = 0
    for _ in range(seconds * 10):
        clock.advance(0.1)
        for _ in range(10):
            got += len(engine.claim(P, "alice", "10.0.0.1", 1)[1])
    return got


def test_a_pass_gives_the_rate_of_shards_run_dry_to_those_with_items(admin, engine, clock, r, tmp_path):
    project_verbs.create(admin, P, {"rate_limit": "600", "rate_burst": "10"}, shards=3)  # 10 items/s
    layout = admin.layout(P)
    on_first = [u for u in (f"https://example.org/p/{i}?a=b" for i in range(3000)) if layout.shard_of(u) == 0]
    item_verbs.add(admin, P, on_first[:400])
    before = served(engine, clock, 10)
    assert before < 45  # a third of the rate: the dry shards' shares unused
    maintainer = Maintainer(r, tmp_path)
    report = maintainer.pass_once()[P]
    dry = shard_passes.DRY_SHARE / 3
    assert report["shard_shares"] == {1: dry, 2: dry, 0: 1.0}
    assert [float(r.hget(k.settings, SHARE_FIELD)) for k in layout.keys] == [1.0, dry, dry]
    assert 100 <= served(engine, clock, 10) <= 115  # the whole rate, and its burst once
    # Shares that stand are not written again (each write bumps a settings age).
    ages = [r.hget(k.settings, "settings_age") for k in layout.keys]
    again = maintainer.pass_once()[P]
    assert "lease" not in again and "shard_shares" not in again
    assert [r.hget(k.settings, "settings_age") for k in layout.keys] == ages
    # An item added to a dry shard is still served, and the next pass shares the rate again.
    late = next(u for u in (f"https://example.org/late/{i}" for i in range(100)) if layout.shard_of(u) == 2)
    item_verbs.add(admin, P, [late])
    assert maintainer.pass_once()[P]["shard_shares"] == {2: 0.5, 0: 0.5}
    got = set()
    for _ in range(50):
        clock.advance(0.5)
        got.update(engine.claim(P, "bob", "10.0.0.2", 1)[1])
    assert late in got


def test_claims_due_to_be_taken_back_keep_their_shard_s_share(admin, engine, clock, r, tmp_path):
    project_verbs.create(admin, P, {"rate_limit": "600", "reclaim_ttl_s": "60"}, shards=3)
    layout = admin.layout(P)
    urls = [f"https://example.org/r/{i}" for i in range(300)]
    on = {i: [u for u in urls if layout.shard_of(u) == i] for i in range(3)}
    item_verbs.add(admin, P, on[0][:50] + on[2][:1])
    claimed = []
    while on[2][0] not in claimed:  # the shard 2 item goes out; its queue is empty then
        clock.advance(1)
        claimed += engine.claim(P, "alice", "10.0.0.1", 1)[1]
    # Claimed on the engine's clock, long before Redis's own: due to be taken back by now.
    dry = shard_passes.DRY_SHARE / 3
    assert Maintainer(r, tmp_path).pass_once()[P]["shard_shares"] == {1: dry, 2: 0.5, 0: 0.5}
    project_verbs.set_settings(
        admin, P, {"reclaim_ttl_s": "0"}
    )  # reclaims off: an out claim waits for nobody
    assert shard_passes.waiting(r, layout.keys[2], int(clock.now * 1000) + 10**12) == 0


def test_each_shard_offloads_and_refills_its_own_queues_in_its_own_folder(admin, engine, r, tmp_path):
    offload = {"offload_high": "20", "offload_low": "10", "offload_segment_items": "10"}
    project_verbs.create(admin, P, offload, shards=3)
    layout = admin.layout(P)
    urls = [f"https://example.org/o/{i}?x=1 2" for i in range(150)]
    item_verbs.add(admin, P, urls)
    sizes = [sum(1 for u in urls if layout.shard_of(u) == i) for i in range(3)]
    maintainer = Maintainer(r, tmp_path)
    report = maintainer.pass_once()[P]
    assert report["offloaded"] == sum(n - 20 for n in sizes) == engine.counts(P)["queues"]["offloaded"]
    assert [r.scard(k.todo) for k in layout.keys] == [20, 20, 20]
    assert all(list((tmp_path / f"{P}.{i}" / P).glob("*.zst")) for i in (1, 2))
    assert list((tmp_path / P).glob("*.zst"))
    got = []
    for _ in range(200):  # claims drain the shards; each refill on demand brings their own back
        got += engine.claim(P, "alice", "10.0.0.1", 5)[1]
        maintainer.refill_now(P)
        if len(got) == len(urls):
            break
    assert sorted(got) == sorted(urls)
    assert engine.counts(P)["queues"]["offloaded"] == 0
    # done_mode=offload: each shard's done set beyond done_offload_high goes to its own files.
    assert engine.done(P, "alice", "1", got, ["example.org", 1], "{}").new == len(urls)
    project_verbs.set_settings(admin, P, {"done_mode": "offload", "done_offload_high": "2"})
    assert maintainer.pass_once()[P]["done_offloaded"] == len(urls) - 3 * 2


def test_the_running_maintainer_refills_a_shard_whose_claims_ask(admin, engine, r, tmp_path):
    # A pass an hour apart: only the shards' asks can bring their segments back meanwhile.
    project_verbs.create(
        admin, P, {"offload_high": "40", "offload_low": "20", "offload_segment_items": "20"}, shards=3
    )
    layout = admin.layout(P)
    urls = [f"https://example.org/d/{i}#x" for i in range(300)]
    item_verbs.add(admin, P, urls)
    stop = threading.Event()
    runner = threading.Thread(target=Maintainer(r, tmp_path, "node-a").run, args=(3600.0, stop))
    runner.start()
    try:
        deadline = time.monotonic() + 10
        while not all(r.hexists(k.settings, REFILL_WATCH_FIELD) for k in layout.keys):
            assert time.monotonic() < deadline, "every shard watched after the first pass"
            time.sleep(0.01)
        got = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and len(got) < len(urls):
            got += engine.claim(P, "alice", "10.0.0.1", 10)[1]
            time.sleep(0.001)
        assert sorted(got) == sorted(urls)
    finally:
        stop.set()
        runner.join(timeout=15)
    assert not runner.is_alive()


def test_a_deleted_project_s_shard_folders_go_with_it(admin, engine, clock, layout, r, tmp_path):
    project_verbs.set_settings(admin, P, {"log_maxlen": "0"})
    work(engine, clock, rounds=1)
    maintainer = Maintainer(r, tmp_path)
    maintainer.pass_once()
    assert (tmp_path / f"{P}.2").is_dir()
    maintainer.release()
    project_verbs.delete(admin, P)
    maintainer.pass_once()
    assert not any(tmp_path.iterdir())


# -- the done log --------------------------------------------------------------------------------


def exported(admin, directory, **kw) -> list[dict]:
    out = io.BytesIO()
    log_verbs.export(admin, P, directory, out, **kw)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_each_shard_archives_its_own_log_and_export_merges_them_in_time_order(
    admin, engine, clock, layout, r, tmp_path
):
    project_verbs.set_settings(admin, P, {"log_maxlen": "2"})
    done = work(engine, clock, rounds=4)  # 12 done entries over the shards
    report = Maintainer(r, tmp_path).pass_once()[P]
    assert report["log_archived"] == 12 - 2 * 3  # each shard keeps its newest two
    assert (tmp_path / P / "log").is_dir()
    assert all((tmp_path / f"{P}.{i}" / P / "log").is_dir() for i in (1, 2))  # no file shared
    assert all(r.xlen(k.log) == 2 for k in layout.keys)
    entries = exported(admin, tmp_path)
    assert len(entries) == 12 and len({e["entry"] + str(e["at"]) for e in entries}) == 12
    ids = [tuple(map(int, e["entry"].split("-"))) for e in entries]
    assert ids == sorted(ids)
    assert sum(len(e["items"]) for e in entries if e["downloader"] == "bob") == done["bob"]
    assert len(exported(admin, tmp_path, downloader="carol")) == 4
    one = entries[5]["items"][0]
    assert [e["entry"] for e in exported(admin, tmp_path, item=one)] == [entries[5]["entry"]]
    # Pages of three walk every entry once, in the same order.
    walked, cursor = [], None
    while True:
        page = log_verbs.done_page(admin, P, tmp_path, cursor=cursor, limit=3)
        walked += page["entries"]
        if page["cursor"] is None:
            break
        cursor = page["cursor"]
    assert [e["entry"] for e in walked] == [e["entry"] for e in entries]
    status = log_verbs.status(admin, P)
    assert (status["archived_entries"], status["stream_entries"], len(status["shards"])) == (6, 6, 3)


def test_the_live_feed_follows_every_shard(engine, clock, layout, redis_url):
    watcher = ProjectWatcher(LiveFeed(redis_url), P)
    watcher._start()
    assert len(watcher.log_keys) == 3 and not watcher.recent
    done = work(engine, clock, rounds=2)
    lines, refreshed = watcher._step(100)
    assert refreshed and sum(len(line["items"]) for line in lines) == sum(done.values())
    assert [line["at"] for line in lines] == sorted(line["at"] for line in lines)
    assert watcher._step(10)[0] == []  # nothing read twice
    watcher.engine.conn.close()


def test_the_live_feed_follows_shards_added_since_it_started(admin, engine, clock, layout, redis_url):
    watcher = ProjectWatcher(LiveFeed(redis_url), P)
    watcher._start()
    project_verbs.grow(admin, P, 4)
    watcher.dirty = True  # what the settings channel says
    watcher._step(10)
    assert len(watcher.log_keys) == 4 and watcher.last_ids[3] == "0-0"
    engine._settings.clear()
    items = item_verbs.add(admin, P, [f"https://example.org/new/{i}" for i in range(40)])
    assert items["added"] == 40
    done = work(engine, clock, rounds=2)
    lines = watcher._step(100)[0]
    assert engine.conn.execute_command("XLEN", admin.layout(P).keys[3].log) > 0
    assert sum(len(line["items"]) for line in lines) == sum(done.values())
    watcher.engine.conn.close()


def test_the_daily_uniques_are_spread_over_the_shards_and_add_up(admin, engine, clock, layout, r):
    # Many clients: no one shard takes every PFADD (the scale benchmark found the first shard
    # the most throttled when it did), and the project's count is the shards' counts added.
    item_verbs.add(admin, P, [f"https://many.example.org/{i}?q=%20#{i}" for i in range(200)])
    clients = [(f"warrior-{n:03d}", f"10.1.{n // 250}.{n % 250}") for n in range(120)]
    for who, ip in clients:
        assert engine.claim(P, who, ip, 1)[0] == 200
    day = int(clock.now * 1000) // stats.DAY_MS
    per_shard = [r.pfcount(k.uniques("downloaders", day)) for k in layout.keys]
    assert all(0 < n < len(clients) for n in per_shard), per_shard
    assert per_shard == [
        sum(1 for who, _ in clients if layout.uniques_shard(who) == i) for i in range(layout.count)
    ]
    snap = stats.StatsReader(engine.conn, engine.layout).snapshot(P, engine.counts(P), int(clock.now * 1000))
    assert snap["uniques"]["downloaders_day"] == len(clients) == snap["uniques"]["ips_day"]
    assert snap["uniques"]["downloaders_month"] == len(clients)
