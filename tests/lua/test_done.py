"""done-20.lua through scripts.done: a claimed item becomes done once; a repeat counts."""

from support.counters import totals
from tracker_core import scripts
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.derived_counters import DONE_ONE_PREFIX, with_derived


def test_done_completes_a_claimed_item_once(conn, project, r, names, now_ms, claimed):
    claimed([names[0]])
    call = dict(
        now_ms=now_ms + 5000,
        downloader="alice",
        version="1",
        item_id="{}",
        ip="10.0.0.1",
        domain_bytes=["data", 300],
        items=[names[0]],
    )
    first = scripts.done(conn, project, **call)
    assert first == (scripts.done.codes.OK, 1, 1, 0, 0, 0, 0)
    assert r.sismember(project.done, names[0]) and r.zcard(project.out) == 0 and r.hlen(project.claims) == 0
    assert (
        r.hget(project.downloader_count, "alice") == "1"
        and r.zscore(project.downloader_bytes, "alice") == 300
    )
    # One item done, claimed 5 s before: one field counts the call, the item and its RTT bucket.
    assert r.hget(project.stats, DONE_ONE_PREFIX + "5") == "1"  # the field the readers add back
    assert not r.hexists(project.stats, "items_done") and not r.hexists(project.stats, "done_requests")
    counted = totals(r, project.stats)
    assert (counted["items_done"], counted["done_requests"], counted["rtt_le_5"]) == (1, 1, 1)
    again = scripts.done(conn, project, **call)
    assert (again.new, again.repeated) == (0, 1)
    assert r.hget(project.downloader_count, "alice") == "1"


def test_done_for_an_unknown_project_or_a_name_found_nowhere(conn, project, r, names, now_ms, k):
    call = dict(
        now_ms=now_ms, downloader="bob", version="", item_id="", ip="", domain_bytes=[], items=names[:1]
    )
    assert scripts.done(conn, ProjectKeys("nowhere"), **call).code == scripts.done.codes.UNKNOWN_PROJECT
    reply = scripts.done(conn, project, **call)
    assert (reply.new, reply.unknown) == (0, 1)
    assert r.scard(project.done) == 0 and r.xlen(project.bad_dones) == 1


def test_done_counters_are_exact_and_the_minute_expires(conn, project, r, names, now_ms, claimed):
    claimed(names[:2])
    minute = project.minute((now_ms + 2000) // 60_000)
    # Past 2^53 a Lua number is not exact: the increments go to Redis as integers.
    r.hset(project.stats, mapping={"items_done": str(2**60), "done_requests": "41"})
    call = dict(now_ms=now_ms + 2000, downloader="alice", version="1", item_id="{}", ip="10.0.0.1")
    reply = scripts.done(conn, project, domain_bytes=["data", 300], items=names[:2], **call)
    assert reply.new == 2
    assert r.hget(project.stats, "items_done") == str(2**60 + 2)
    assert r.hget(project.stats, "done_requests") == "42"
    assert r.hmget(
        minute, "items_done", "bytes_done", "rtt_sum_ms", "rtt_count", "done_requests", "rtt_le_5"
    ) == ["2", "300", "4000", None, None, "2"]  # done calls: a total only, read per minute by nothing
    # No count stored: the buckets add up to it (derived_counters).
    assert with_derived({f: int(v) for f, v in r.hgetall(minute).items()})["rtt_count"] == 2
    assert 0 < r.ttl(minute) <= 172_800  # a minute hash the done created gets its expiry
    # A call with nothing new counts only itself; the expiry stays as set.
    r.expire(minute, 100)
    again = scripts.done(conn, project, domain_bytes=["data", 300], items=names[:2], **call)
    assert (again.new, again.repeated) == (0, 2)
    assert r.hget(minute, "items_done") == "2" and not r.hexists(minute, "done_requests")
    assert 0 < r.ttl(minute) <= 100
    assert r.hget(project.stats, "done_requests") == "43" and r.hget(project.stats, "dones_repeated") == "2"


def test_done_numbers_are_the_same_with_one_domain_or_several(conn, project, r, names, now_ms, claimed):
    # One domain: its share is also the total (written once as digits and used for both); two
    # domains: the total is their sum. The log entry, the leaderboard and the counters agree.
    claimed(names[:3])
    call = dict(now_ms=now_ms + 2000, version="1", item_id="{}", ip="10.0.0.1")
    one = scripts.done(
        conn, project, downloader="alice", domain_bytes=["a.example", 300], items=names[:1], **call
    )
    two = scripts.done(
        conn,
        project,
        downloader="bob",
        domain_bytes=["a.example", 50, "b.example", 7],
        items=names[1:3],
        **call,
    )
    assert one.new == 1 and two.new == 2
    entries = [fields for _, fields in r.xrange(project.log)]
    assert [(e["downloader"], e["bytes"], e["domains"], e["at"]) for e in entries] == [
        ("alice", "300", "a.example\x00300", str(now_ms + 2000)),
        ("bob", "57", "a.example\x0050\x00b.example\x007", str(now_ms + 2000)),
    ]
    assert (
        r.zscore(project.downloader_bytes, "alice") == 300 and r.zscore(project.downloader_bytes, "bob") == 57
    )
    assert r.hgetall(project.domain_bytes) == {"a.example": "350", "b.example": "7"}
    assert r.hgetall(project.downloader_count) == {"alice": "1", "bob": "2"}
    # alice's done of one item counts done_one_le_5, bob's of two items_done: 3 in all.
    assert (totals(r, project.stats)["bytes_done"], totals(r, project.stats)["items_done"]) == (357, 3)


def test_one_field_counts_a_call_of_one_item_with_an_rtt_and_only_that(
    conn, project, r, names, now_ms, claimed
):
    claimed(names[:2])
    call = dict(now_ms=now_ms + 2000, downloader="alice", version="1", item_id="{}", ip="10.0.0.1")
    minute = project.minute((now_ms + 2000) // 60_000)
    # One new item beside a repeat: still one item done with an RTT, so done_one_le_5.
    assert scripts.done(conn, project, domain_bytes=[], items=names[:1], **call).new == 1
    reply = scripts.done(conn, project, domain_bytes=[], items=[names[1], names[0]], **call)
    assert (reply.new, reply.repeated) == (1, 1)
    assert r.hget(project.stats, "done_one_le_5") == "2" and r.hget(minute, "done_one_le_5") == "2"
    # A claimed item whose record is gone has no RTT: counted field by field.
    claimed([names[2]], downloader="bob")
    r.hdel(project.claims, names[2])
    assert scripts.done(conn, project, domain_bytes=[], items=names[2:], **call).new == 1
    stored = r.hgetall(project.stats)
    assert (stored["items_done"], stored["done_requests"], stored["dones_repeated"]) == ("1", "1", "1")
    counted = totals(r, project.stats)
    assert (counted["items_done"], counted["done_requests"], counted["rtt_count"]) == (3, 3, 2)
    assert with_derived({f: int(v) for f, v in r.hgetall(minute).items()})["items_done"] == 3
