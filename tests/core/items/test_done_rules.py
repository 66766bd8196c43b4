"""The rules of done (done-20.lua, docs/protocol.md's "The done rules"), against a real Redis.

One rule for every item: out (whoever claimed it) or dead becomes done; a repeat changes nothing;
an item waiting in a queue changes nothing and is refused unless the project accepts such dones;
a name found nowhere is unknown. Bytes per item are capped, ids and bad_dones are bounded, and no
input makes the script fail after its first write.
"""

import json

import pytest

from support.counters import totals
from support.projects import new_project
from tracker_core import scripts
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.settings_schema import DEFAULT_MAX_BYTES_PER_ITEM, validate
from tracker_core.scripts.derived_counters import with_derived

P = "rules"
K = ProjectKeys(P)
SEESAW = {"downloader": "mallory", "version": "20240101.01"}


def url(n: int, size: int = 100) -> str:
    head = f"https://example.com/u/{n}?q=%2F a#x-"
    return head + "y" * (size - len(head))


@pytest.fixture
def project(admin):
    return new_project(admin, P)


def post(client, path, body):
    # json.dumps, as seesaw sends it (orjson would refuse the deepest ids tested here).
    return client.simulate_post(
        path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )


def state(r):
    """Every key of the project but its counters and the bad_dones record."""
    out = {}
    for key in r.scan_iter(f"{{{P}}}:*"):
        if key in (K.stats, K.bad_dones) or ":minute:" in key:
            continue
        kind = r.type(key)
        out[key] = {
            "set": r.smembers,
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "hash": r.hgetall,
            "string": r.dump,
            "stream": r.xrange,
        }[kind](key)
    return out


def counter(r, field):
    return totals(r, K.stats).get(field, 0)


# -- dead items --------------------------------------------------------------------------------


def test_a_late_done_for_a_dead_item_completes_it(project, admin, engine, clock, r):
    project_verbs.set_settings(admin, P, {"reclaim_ttl_s": "1", "max_reclaims": "1"})
    item_verbs.add(admin, P, [url(1)])
    assert engine.claim(P, "alice", "10.0.0.1", 1) == (200, [url(1)])
    clock.advance(1.5)
    assert engine.claim(P, "bob", "10.0.0.2", 1) == (200, [url(1)])
    clock.advance(3)
    assert engine.claim(P, "carol", "10.0.0.3", 1) == (404, [])
    assert r.hexists(K.dead, url(1))
    # alice finishes after all: the work is kept, counted once, credited to her.
    result = engine.done(P, "alice", "20240101.01", [url(1)], ["data", 5000], "{}")
    assert (result.new, result.unknown) == (1, 0)
    assert not r.hexists(K.dead, url(1)) and r.sismember(K.done, url(1))
    assert counter(r, "items_done") == 1 and counter(r, "items_dead_done") == 1
    assert r.zscore(K.downloader_bytes, "alice") == 5000
    assert r.hget(K.downloader_count, "alice") == "1"
    again = engine.done(P, "bob", "20240101.01", [url(1)], ["data", 5000], "{}")
    assert (again.new, again.repeated) == (0, 1) and counter(r, "items_done") == 1


# -- queued items ------------------------------------------------------------------------------


def test_a_done_for_100_queued_items_changes_nothing_and_is_refused(client, project, admin, r):
    names = [url(n) for n in range(100)]
    item_verbs.add(admin, P, names[:60])
    item_verbs.add(admin, P, names[60:80], queue="secondary")
    item_verbs.add(admin, P, names[80:], queue="backfeed")
    before = state(r)
    res = post(
        client,
        "/rules/done",
        {**SEESAW, "item": "\0".join(names), "bytes": {"data": 9_999_999_999_999}, "id": {}},
    )
    assert res.status_code == 200 and res.text == "OK"  # a real client must not loop
    assert state(r) == before
    assert counter(r, "dones_refused") == 100 and counter(r, "items_done") == 0
    assert r.zrange(K.downloader_bytes, 0, -1) == []
    entry = r.xrange(K.bad_dones)[-1][1]
    assert entry["reason"] == "queued" and entry["count"] == "100"
    assert client.simulate_get("/rules/stats.json").json["leaderboard"] == []


def test_a_done_for_an_item_in_the_senders_own_queue_is_refused(project, admin, engine, r):
    item_verbs.add(admin, P, [url(1)], queue="downloader:mallory")
    result = engine.done(P, "mallory", "", [url(1)], ["data", 10], "{}")
    assert (result.new, result.refused) == (0, 1)
    assert r.sismember(K.downloader_queue("mallory"), url(1))


def test_accept_queued_dones_completes_them_as_the_old_tracker_did(project, admin, engine, r):
    project_verbs.set_settings(admin, P, {"accept_queued_dones": "true"})
    item_verbs.add(admin, P, [url(1), url(2)])
    result = engine.done(P, "mallory", "", [url(1), url(2), url(3)], ["data", 30], "{}")
    assert (result.new, result.refused, result.unknown) == (2, 0, 1)
    assert r.scard(K.todo) == 0 and r.smembers(K.done) == {url(1), url(2)}
    assert r.zscore(K.downloader_bytes, "mallory") == 20


def test_a_done_completes_an_item_that_is_out_whoever_reports_it(project, admin, engine, r):
    item_verbs.add(admin, P, [url(1)])
    engine.claim(P, "alice", "10.0.0.1", 1)
    assert engine.done(P, "bob", "", [url(1)], [], "{}").new == 1
    assert r.hget(K.downloader_count, "bob") == "1"


# -- bytes per item ----------------------------------------------------------------------------


def claimed(admin, engine, n):
    names = [url(i) for i in range(n)]
    item_verbs.add(admin, P, names)
    status, items = engine.claim(P, "alice", "10.0.0.1", n)
    assert status == 200 and len(items) == n
    return items


def test_bytes_at_the_cap_per_item_are_credited_in_full(project, admin, engine, r):
    items = claimed(admin, engine, 2)
    result = engine.done(P, "alice", "", items, ["data", 2 * DEFAULT_MAX_BYTES_PER_ITEM], "{}")
    assert not result.clamped and counter(r, "dones_bytes_clamped") == 0
    assert r.zscore(K.downloader_bytes, "alice") == 2 * DEFAULT_MAX_BYTES_PER_ITEM


def test_bytes_past_the_cap_are_cut_to_it_and_counted(client, project, admin, engine, r):
    items = claimed(admin, engine, 1)
    res = post(
        client,
        "/rules/done",
        {**SEESAW, "item": items[0], "id": None, "bytes": {"data": 9_999_999_999_998, "warc": 1}},
    )
    assert res.status_code == 200 and res.text == "OK"
    assert r.sismember(K.done, items[0])
    assert r.zscore(K.downloader_bytes, "mallory") <= DEFAULT_MAX_BYTES_PER_ITEM
    assert r.zscore(K.downloader_bytes, "mallory") >= DEFAULT_MAX_BYTES_PER_ITEM - 1
    assert int(r.hget(K.domain_bytes, "data")) <= DEFAULT_MAX_BYTES_PER_ITEM
    assert counter(r, "dones_bytes_clamped") == 1
    assert counter(r, "bytes_done") == int(r.zscore(K.downloader_bytes, "mallory"))


def test_one_byte_past_the_cap_is_clamped_and_a_cap_of_0_is_off(project, admin, engine, r):
    project_verbs.set_settings(admin, P, {"max_bytes_per_item": "1000"})
    items = claimed(admin, engine, 3)
    assert engine.done(P, "alice", "", items[:1], ["data", 1001], "{}").clamped
    assert r.zscore(K.downloader_bytes, "alice") == 1000
    project_verbs.set_settings(admin, P, {"max_bytes_per_item": "0"})
    assert not engine.done(P, "alice", "", items[1:2], ["data", 10**12 + 1], "{}").clamped
    assert r.zscore(K.downloader_bytes, "alice") == 1000 + 10**12 + 1


def test_the_default_cap_is_100_gb_per_item(project, admin, engine, r):
    # At 1 TB a single done could top the leaderboard (multi=100: up to the 10^13 per done).
    assert DEFAULT_MAX_BYTES_PER_ITEM == 10**11
    items = claimed(admin, engine, 2)
    assert not engine.done(P, "alice", "", items[:1], ["data", 10**11], "{}").clamped
    assert engine.done(P, "alice", "", items[1:], ["data", 10**11 + 1], "{}").clamped
    assert r.zscore(K.downloader_bytes, "alice") == 2 * 10**11
    assert r.hget(K.settings, "max_bytes_per_item") in (None, str(10**11))


def test_max_bytes_per_item_is_validated():
    assert validate("max_bytes_per_item", "0") == "0"
    assert validate("max_bytes_per_item", str(10**13 - 1)) == str(10**13 - 1)
    with pytest.raises(ValueError, match="max_bytes_per_item"):
        validate("max_bytes_per_item", str(10**13))
    with pytest.raises(ValueError):
        validate("max_bytes_per_item", "-1")


# -- the id ------------------------------------------------------------------------------------


def nested(depth):
    value = "hash"
    for _ in range(depth):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    "item_id,kept",
    [
        (nested(250), True),  # orjson writes up to 254 levels
        (nested(300), False),  # deeper: replaced, the done still counts
        ({"sha1": "f" * 4090}, False),  # over 4,096 bytes as JSON
        ({"sha1": "f" * 4070}, True),
    ],
)
def test_an_id_that_cannot_be_kept_is_replaced_and_the_done_counts(
    client, project, admin, engine, r, item_id, kept
):
    items = claimed(admin, engine, 1)
    res = post(client, "/rules/done", {**SEESAW, "item": items[0], "bytes": {"data": 1}, "id": item_id})
    assert res.status_code == 200 and res.text == "OK"
    assert r.sismember(K.done, items[0])
    logged = json.loads(r.xrange(K.log)[-1][1]["id"])
    if kept:
        assert logged == item_id and counter(r, "dones_id_dropped") == 0
    else:
        assert "dropped" in logged and counter(r, "dones_id_dropped") == 1


# -- bad_dones ---------------------------------------------------------------------------------


def test_bad_dones_keep_at_most_1_kb_of_names_per_entry(project, engine, r):
    names = [url(n, 4096) for n in range(1000)]
    result = engine.done(P, "mallory", "", names, [], "{}")
    assert result.unknown == 1000
    entry = r.xrange(K.bad_dones)[-1][1]
    assert entry["count"] == "1000" and entry["reason"] == "unknown"
    assert len(entry["items"].encode()) <= 1024 and entry["items"] == names[0][:1024]


def test_bad_dones_cut_names_at_a_character_boundary(project, engine, r):
    names = ["ab", "\u00e9" * 600]  # 2 + 1 + 1,200 bytes: the cut falls inside an é
    engine.done(P, "mallory", "", names, [], "{}")
    items = r.xrange(K.bad_dones)[-1][1]["items"]  # decodes: no sequence cut in two
    assert items == "ab\0" + "\u00e9" * 510 and len(items.encode()) == 1023


def test_bad_dones_are_capped_by_count(project, engine, r):
    for n in range(10_200):
        engine.done(P, "mallory", "", [f"ghost{n}"], [], "{}")
    assert r.xlen(K.bad_dones) <= 10_100  # MAXLEN ~ 10000 trims whole stream nodes


# -- nothing fails after the first write --------------------------------------------------------


def run_done(engine, argv):
    """The done script with raw ARGV (what scripts.done would never send)."""
    return scripts.done.send(engine.conn, scripts.done.keys(K, downloader="alice", now_ms=0), argv)


@pytest.mark.parametrize(
    "argv",
    [
        (1, "alice", "", "{}", "", 1, "data", "lots"),  # a byte count that is not a number
        ("now", "alice", "", "{}", "", 0),  # a time that is not a number
        (1, "alice", "", "{}", "", "two", "data", 1),  # a domain count that is not a number
    ],
)
def test_a_done_with_an_argument_that_is_not_a_number_changes_nothing(project, admin, engine, r, argv):
    items = claimed(admin, engine, 1)
    before = state(r)
    with pytest.raises(scripts.ScriptError):
        run_done(engine, (*argv, *items))
    assert state(r) == before and counter(r, "done_requests") == 0


def test_a_huge_stored_log_maxlen_does_not_fail_the_done(project, admin, engine, r):
    # Older data, or a setting written around the validator: XADD would get "1e+20".
    r.hset(K.settings, "log_maxlen", "100000000000000000000")
    items = claimed(admin, engine, 1)
    assert engine.done(P, "alice", "", items, ["data", 10], "{}").new == 1
    assert counter(r, "items_done") == 1 and len(r.xrange(K.log)) == 1
    with pytest.raises(ValueError, match="log_maxlen"):
        validate("log_maxlen", str(10**9 + 1))


def test_a_done_of_the_maximum_batch_of_the_longest_names(project, admin, engine, r):
    names = [url(n, 4096) for n in range(1000)]
    item_verbs.add(admin, P, names)
    status, items = engine.claim(P, "alice", "10.0.0.1", 1000)
    assert status == 200 and len(items) == 1000
    result = engine.done(P, "alice", "", items, ["data", 10**12], "{}")
    assert result.new == 1000 and r.zcard(K.out) == 0 and r.scard(K.done) == 1000
    assert len(r.xrange(K.log)[-1][1]["items"]) == 1000 * 4096 + 999


def test_a_fractional_claim_time_does_not_fail_the_done(project, admin, engine, r, clock):
    # Old data (a record of three fields: `out` scored the claim time): HINCRBY of the RTT sum
    # takes integers only.
    items = claimed(admin, engine, 1)
    r.zadd(K.out, {items[0]: int(clock.now * 1000) - 1500.5})
    r.hset(K.claims, items[0], "alice\t10.0.0.1\t1")
    assert engine.done(P, "alice", "", items, ["data", 1], "{}").new == 1
    assert counter(r, "items_done") == 1 and counter(r, "rtt_sum_ms") in (1500, 1501)


# -- counters stay bounded -----------------------------------------------------------------------

LIMIT = 2**53


def test_counters_near_overflow_never_fail_a_done_after_its_first_write(project, admin, engine, clock, r):
    # Past 2^63 HINCRBY fails "would overflow": the item had already left out and entered done,
    # the log entry and items_done were never written, and the retry was taken as a repeat.
    items = claimed(admin, engine, 2)
    minute = K.minute(int(clock() * 1000) // 60000)
    r.hset(K.domain_bytes, "data", 9223372036854775000)
    r.hset(K.stats, mapping={"bytes_done": LIMIT - 10, "rtt_sum_ms": 9223372036854775000})
    r.hset(minute, "bytes_done", LIMIT - 100)
    result = engine.done(P, "alice", "", items[:1], ["data", 5000, "warc", 300], "{}")
    assert (result.new, result.clamped) == (1, True)
    assert r.sismember(K.done, items[0]) and r.zcard(K.out) == 1
    assert counter(r, "items_done") == 1 and r.hget(K.downloader_count, "alice") == "1"
    assert counter(r, "dones_bytes_clamped") == 1
    # data was already full: it gets nothing; warc's share fits in the 10 bytes stats had left.
    assert r.hget(K.domain_bytes, "data") == "9223372036854775000"
    assert int(r.hget(K.domain_bytes, "warc")) == 10
    assert counter(r, "bytes_done") == LIMIT and int(r.hget(minute, "bytes_done")) == LIMIT - 90
    assert r.zscore(K.downloader_bytes, "alice") == 10
    assert counter(r, "rtt_sum_ms") == 9223372036854775000
    ((_, entry),) = r.xrange(K.log)
    assert entry["items"] == items[0] and entry["bytes"] == "10"
    assert entry["domains"] == "data\x000\x00warc\x0010"
    # A counter just under the bound takes what fits, exactly; the next done adds nothing.
    # (The downloader's score grows with the project's total, so it is at most that.)
    r.hset(K.domain_bytes, "data", LIMIT - 7)
    r.hset(K.stats, "bytes_done", LIMIT - 5)
    r.zadd(K.downloader_bytes, {"alice": LIMIT - 5})
    assert engine.done(P, "alice", "", items[1:], ["data", 100], "{}").new == 1
    assert int(r.hget(K.domain_bytes, "data")) == LIMIT - 2
    assert r.zscore(K.downloader_bytes, "alice") == LIMIT and counter(r, "bytes_done") == LIMIT
    assert counter(r, "items_done") == 2 and r.xlen(K.log) == 2 and r.zcard(K.out) == 0


def test_counters_above_a_deleted_total_grow_past_the_bound_and_never_fail(project, admin, engine, clock, r):
    # done reads the room of the project's totals only: the minute's counters and the
    # downloader's score grow by the same increments, so they are at most the totals. Were the
    # stats hash deleted by hand, they pass 2^53 by what they held, far from HINCRBY's 2^63.
    items = claimed(admin, engine, 2)
    minute = K.minute(int(clock() * 1000) // 60000)
    r.hset(minute, mapping={"bytes_done": LIMIT, "rtt_sum_ms": LIMIT})
    r.zadd(K.downloader_bytes, {"alice": LIMIT})
    r.delete(K.stats)
    clock.advance(2)
    result = engine.done(P, "alice", "", items[:1], ["data", 4096], "{}")
    assert (result.new, result.clamped) == (1, False)
    assert int(r.hget(minute, "bytes_done")) == LIMIT + 4096 and counter(r, "bytes_done") == 4096
    assert int(r.hget(minute, "rtt_sum_ms")) == LIMIT + 2000
    assert r.zscore(K.downloader_bytes, "alice") == LIMIT + 4096
    assert r.sismember(K.done, items[0]) and r.xlen(K.log) == 1


def test_a_done_within_the_counters_room_is_not_clamped(project, admin, engine, r):
    items = claimed(admin, engine, 1)
    r.hset(K.domain_bytes, "data", LIMIT - 5000)
    r.hset(K.stats, "bytes_done", LIMIT - 5000)
    result = engine.done(P, "alice", "", items, ["data", 5000], "{}")
    assert (result.new, result.clamped) == (1, False)
    assert int(r.hget(K.domain_bytes, "data")) == LIMIT and counter(r, "bytes_done") == LIMIT


# -- domains kept ------------------------------------------------------------------------------

MAX_DOMAINS = 64


def test_domain_bytes_keeps_64_domains_and_counts_the_rest_under_other(project, admin, engine, r):
    items = claimed(admin, engine, 4)
    r.hset(K.domain_bytes, mapping={f"d{i}.example": 1 for i in range(MAX_DOMAINS - 1)})
    # At the cap: the 64th domain is kept; the 65th, new, goes to 'other'.
    assert engine.done(P, "alice", "", items[:1], ["d-64th", 10, "d-65th", 20], "{}").new == 1
    assert r.hget(K.domain_bytes, "d-64th") == "10" and not r.hexists(K.domain_bytes, "d-65th")
    assert r.hget(K.domain_bytes, "other") == "20"
    # Full: known domains still count; every new one (an anonymous client's 32) is 'other'.
    names = [f"{'x' * 90}{n}" for n in range(32)]
    flat = [v for n in names for v in (n, 1)]
    engine.done(P, "alice", "", items[1:2], ["d0.example", 5, *flat], "{}")
    assert r.hget(K.domain_bytes, "d0.example") == "6"
    assert r.hget(K.domain_bytes, "other") == str(20 + 32)
    assert r.hlen(K.domain_bytes) == MAX_DOMAINS + 1
    entry = r.xrange(K.log)[-1][1]  # the log keeps what the client reported
    assert entry["domains"].split("\0")[:2] == ["d0.example", "5"]
    assert engine.done(P, "alice", "", items[2:3], ["d-64th", 1], "{}").new == 1
    assert r.hget(K.domain_bytes, "d-64th") == "11" and r.hlen(K.domain_bytes) == MAX_DOMAINS + 1


BROKEN_KEYS = [
    "done",
    "minute",
    "downloader_bytes",
    "log",
    "downloader_count",
    "downloader_version",
    "domain_bytes",
    "stats",
    "downloader_claims",
    "reclaim_history",
]


@pytest.mark.parametrize("names", [1, 2])
@pytest.mark.parametrize("broken", BROKEN_KEYS)
def test_a_broken_key_fails_the_done_before_the_item_leaves_out(admin, engine, clock, r, broken, names):
    # Redis keeps a failed script's writes: every place the done writes is type-checked first
    # (with one name, `done` by the SADD that is then the first write; with two, by a probe).
    project_verbs.create(admin, "brk")
    k = ProjectKeys("brk")
    item_verbs.add(admin, "brk", [f"https://example.com/a b?c=%20#d{n}" for n in range(names)])
    status, items = engine.claim("brk", "alice", "10.0.0.1", names)
    assert status == 200 and len(items) == names
    if broken == "reclaim_history":  # only an item claimed before writes it: the first, twice
        record = r.hget(k.claims, items[0]).split("\t")
        r.hset(k.claims, items[0], "\t".join([*record[:2], "2", record[3]]))
    key = k.minute(int(clock() * 1000) // 60000) if broken == "minute" else getattr(k, broken)
    r.delete(key)
    r.set(key, "not the right type")
    with pytest.raises(Exception, match="WRONGTYPE"):
        engine.done("brk", "alice", "1", items, ["data", 1], "{}")
    assert sorted(r.zrange(k.out, 0, -1)) == sorted(items)
    assert all(r.hexists(k.claims, item) for item in items)


@pytest.mark.parametrize("claimed_too", [False, True])
@pytest.mark.parametrize("reason", ["unknown", "queued"])
def test_a_broken_bad_dones_fails_the_done_before_anything_is_written(admin, engine, r, reason, claimed_too):
    # A refused or unknown name is recorded in bad_dones: alone, that XADD is the first write;
    # beside a claimed name, bad_dones is probed before the claimed one moves.
    project_verbs.create(admin, "brkbad")
    k = ProjectKeys("brkbad")
    item_verbs.add(admin, "brkbad", ["https://example.com/claimed?a=%20#b", "https://example.com/q ueued"])
    status, items = engine.claim("brkbad", "alice", "10.0.0.1", 1)
    assert status == 200
    bad = "https://nowhere.example/x?y=%20#z" if reason == "unknown" else r.srandmember(k.todo)
    r.set(k.bad_dones, "not the right type")
    before = r.hgetall(k.stats)
    with pytest.raises(Exception, match="WRONGTYPE"):
        engine.done("brkbad", "alice", "1", [*items, bad] if claimed_too else [bad], ["data", 1], "{}")
    assert r.zrange(k.out, 0, -1) == items and r.hexists(k.claims, items[0])
    assert r.hgetall(k.stats) == before and not r.exists(k.done) and not r.exists(k.log)


def test_a_broken_key_a_done_does_not_write_does_not_fail_it(admin, engine, r):
    # One name claimed once: reclaim_history is neither written nor probed; with no version
    # reported, downloader_version neither.
    project_verbs.create(admin, "brk1")
    k = ProjectKeys("brk1")
    item_verbs.add(admin, "brk1", ["https://example.com/a b?c=%20#once"])
    status, items = engine.claim("brk1", "alice", "10.0.0.1", 1)
    for name in ("reclaim_history", "downloader_version"):
        r.set(getattr(k, name), "not the right type")
    assert engine.done("brk1", "alice", "", items, ["data", 1], "{}").new == 1
    assert r.sismember(k.done, items[0]) and not r.exists(k.out) and not r.exists(k.downloader_claims)


def _broken_done_set(admin, r, project: str) -> ProjectKeys:
    project_verbs.create(admin, project)
    k = ProjectKeys(project)
    r.delete(k.done)
    r.set(k.done, "not the right type")
    return k


def test_one_dead_name_stays_dead_when_the_done_set_is_broken(admin, engine, r):
    # With one name there is no probe of `done`: the SISMEMBER that comes before the `dead` and
    # queue branches reads its type before the item leaves its place.
    k = _broken_done_set(admin, r, "brkdead")
    name = "https://example.com/dead?x=%41#y"
    r.hset(k.dead, name, '{"reason": "reclaimed too often"}')
    with pytest.raises(Exception, match="WRONGTYPE"):
        engine.done("brkdead", "alice", "1", [name], ["data", 1], "{}")
    assert r.hexists(k.dead, name)


def test_one_queued_name_accepted_stays_queued_when_the_done_set_is_broken(admin, engine, r):
    k = _broken_done_set(admin, r, "brkqueue")
    project_verbs.set_settings(admin, "brkqueue", {"accept_queued_dones": "true"})
    name = "https://example.com/queued?x=%41#y"
    item_verbs.add(admin, "brkqueue", [name])
    with pytest.raises(Exception, match="WRONGTYPE"):
        engine.done("brkqueue", "alice", "1", [name], ["data", 1], "{}")
    assert r.sismember(k.todo, name)


def _claim_with_broken_dead_hash(admin, engine, r, project: str) -> tuple[ProjectKeys, list[str]]:
    project_verbs.create(admin, project)
    k = ProjectKeys(project)
    item_verbs.add(admin, project, ["https://example.com/first?a=%20#b"])
    status, items = engine.claim(project, "alice", "10.0.0.1", 1)
    assert status == 200
    r.set(k.dead, "not the right type")
    return k, items


def test_a_broken_dead_hash_fails_a_two_name_done_before_the_first_leaves_out(admin, engine, r):
    # The second name is in no queue, so the done would look it up in `dead` after the first
    # name's writes: the probe fails the call before any.
    k, items = _claim_with_broken_dead_hash(admin, engine, r, "brk2")
    with pytest.raises(Exception, match="WRONGTYPE"):
        engine.done("brk2", "alice", "1", [items[0], "https://example.com/elsewhere"], ["data", 1], "{}")
    assert r.zrange(k.out, 0, -1) == items and not r.exists(k.done)


def test_a_broken_dead_hash_does_not_stop_a_one_name_done_of_a_claim(admin, engine, r):
    # With one name found in `out` the done never reads `dead`: the claim is completed.
    k, items = _claim_with_broken_dead_hash(admin, engine, r, "brk1")
    assert engine.done("brk1", "alice", "1", items, ["data", 1], "{}").new == 1
    assert r.sismember(k.done, items[0]) and not r.zrange(k.out, 0, -1)


def test_a_broken_domain_bytes_is_left_alone_by_a_done_reporting_no_domain(admin, engine, r):
    # done writes domain_bytes only for reported domains (read first): with none, no probe of it.
    project_verbs.create(admin, "brk")
    k = ProjectKeys("brk")
    item_verbs.add(admin, "brk", ["https://example.com/a b?c=%20#d"])
    status, items = engine.claim("brk", "alice", "10.0.0.1", 1)
    r.set(k.domain_bytes, "not the right type")
    assert engine.done("brk", "alice", "1", items, [], "{}").new == 1
    assert r.sismember(k.done, items[0]) and r.get(k.domain_bytes) == "not the right type"


# -- counters ----------------------------------------------------------------------------------


@pytest.mark.parametrize("done_mode", ["keep", "discard"])
def test_a_name_given_twice_in_one_done_counts_as_if_read_in_turn(project, admin, engine, r, done_mode):
    project_verbs.set_settings(admin, P, {"done_mode": done_mode})
    item_verbs.add(admin, P, [url(1)])
    assert engine.claim(P, "alice", "10.0.0.1", 1) == (200, [url(1)])
    result = engine.done(P, "alice", "1", [url(1), url(2), url(1), url(2)], ["data", 40], "{}")
    # The first url(1) leaves out; the second then finds it done (kept) or nowhere (discarded).
    if done_mode == "keep":
        assert (result.new, result.repeated, result.unknown) == (1, 1, 2)
    else:
        assert (result.new, result.repeated, result.unknown) == (1, 0, 3)
    assert (
        counter(r, "items_done") == 1
        and with_derived({f: int(v) for f, v in r.hgetall(K.stats).items()})["rtt_count"] == 1
    )
    assert r.zcard(K.out) == 0 and r.hget(K.downloader_claims, "alice") is None


def test_a_done_counts_each_rtt_bucket_of_the_call(project, admin, engine, clock, r):
    item_verbs.add(admin, P, [url(1)])
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    clock.advance(20)
    item_verbs.add(admin, P, [url(2)])
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    clock.advance(2)
    r.hset(K.stats, "rtt_le_30", str(2**60))  # past what a Lua number holds exactly
    assert engine.done(P, "alice", "1", [url(1), url(2)], [], "{}").new == 2
    minute = K.minute(int(clock.now * 1000) // 60_000)
    assert r.hget(K.stats, "rtt_le_30") == str(2**60 + 1) and r.hget(K.stats, "rtt_le_5") == "1"
    assert r.hmget(minute, "rtt_le_5", "rtt_le_30", "rtt_count", "rtt_sum_ms") == ["1", "1", None, "24000"]
    assert (
        with_derived({f: int(v) for f, v in r.hgetall(minute).items()})["rtt_count"] == 2
    )  # the buckets' sum (derived_counters)


# -- the holder's count and the version, read before they are written ----------------------------


def _calls(r, command: str) -> int:
    return r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0)


def test_a_one_name_done_takes_one_claim_off_its_holder_whatever_the_count(project, admin, engine, r):
    items = claimed(admin, engine, 3)  # alice holds three
    for n, left in ((0, "2"), (1, "1")):
        assert engine.done(P, "alice", "1", [items[n]], [], "{}").new == 1
        assert r.hget(K.downloader_claims, "alice") == left
    # A count that is not an integer (HINCRBY would fail after the item moved) is taken away.
    r.hset(K.downloader_claims, "alice", "1.5")
    assert engine.done(P, "alice", "1", [items[2]], [], "{}").new == 1
    assert not r.hexists(K.downloader_claims, "alice") and r.scard(K.done) == 3


def test_the_version_is_written_only_when_it_changed(project, admin, engine, r):
    items = claimed(admin, engine, 3)
    r.config_resetstat()
    assert engine.done(P, "alice", "20240101.01", items[:1], [], "{}").new == 1
    assert r.hget(K.downloader_version, "alice") == "20240101.01" and _calls(r, "hset") == 1
    assert engine.done(P, "alice", "20240101.01", items[1:2], [], "{}").new == 1
    assert _calls(r, "hset") == 1  # the same version: read, not written again
    assert engine.done(P, "alice", "20240202.02", items[2:], [], "{}").new == 1
    assert r.hget(K.downloader_version, "alice") == "20240202.02" and _calls(r, "hset") == 2


def test_a_done_of_several_names_takes_a_count_that_is_no_integer_away(project, admin, engine, r):
    # Read before each item's writes: a broken count no longer fails the call half-way.
    items = claimed(admin, engine, 3)
    r.hset(K.downloader_claims, "alice", "x")
    assert engine.done(P, "alice", "1", items[:2], [], "{}").new == 2
    assert not r.hexists(K.downloader_claims, "alice") and r.scard(K.done) == 2 and r.zcard(K.out) == 1
    r.hset(K.downloader_claims, "alice", "5")
    assert engine.done(P, "alice", "1", items[2:], [], "{}").new == 1
    assert r.hget(K.downloader_claims, "alice") == "4"


@pytest.mark.parametrize(("stored", "left"), [(LIMIT - 1, str(LIMIT - 2)), (LIMIT, None)])
def test_a_holder_count_is_decremented_up_to_2_53_and_taken_away_from_it(
    project, admin, engine, r, stored, left
):
    # Past 2^53 a Lua number is no longer exact and HINCRBY could fail past 2^63 after the item
    # moved: a count at the bound (only a hand edit makes one) is taken away.
    items = claimed(admin, engine, 1)
    r.hset(K.downloader_claims, "alice", stored)
    assert engine.done(P, "alice", "1", items, [], "{}").new == 1
    assert r.hget(K.downloader_claims, "alice") == left
