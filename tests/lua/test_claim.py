"""claim-21.lua through scripts.claim: items leave the queues for `out`, atomically."""

from tracker_core import scripts
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.constants import DEFAULT_RECLAIM_TTL_S
from tracker_core.scripts.derived_counters import with_derived


def claim(conn, k, now_ms, wanted=2, downloader="alice", ip="10.1.2.3"):
    return scripts.claim(conn, k, now_ms=now_ms, downloader=downloader, ip=ip, wanted=wanted)


def test_claim_moves_items_from_todo_to_out(conn, project, r, names, now_ms):
    r.sadd(project.todo, *names)
    reply = claim(conn, project, now_ms)
    assert reply.code == scripts.claim.codes.OK and reply.settings_age == 1
    assert len(reply.items) == 2 and set(reply.items) <= set(names)
    # `out` scores each claim by when it may be reclaimed; the record keeps the claim time.
    due = float(now_ms + DEFAULT_RECLAIM_TTL_S * 1000)
    assert r.zrange(project.out, 0, -1, withscores=True) == sorted((n, due) for n in reply.items)
    assert {n: r.hget(project.claims, n) for n in reply.items} == dict.fromkeys(
        reply.items, f"alice\t10.1.2.3\t1\t{now_ms}"
    )
    assert r.smembers(project.todo) == set(names) - set(reply.items)
    assert r.hget(project.stats, "items_claimed") == "2"


def test_claim_refusals_change_no_queue(conn, project, r, names, now_ms, k):
    assert claim(conn, ProjectKeys("nowhere"), now_ms).code == scripts.claim.codes.UNKNOWN_PROJECT
    assert claim(conn, project, now_ms).code == scripts.claim.codes.NOTHING  # nothing queued
    r.sadd(project.todo, *names)
    r.hset(project.settings, "paused", "1")
    assert claim(conn, project, now_ms) == (scripts.claim.codes.NOTHING, 1, [])
    assert r.scard(project.todo) == len(names) and r.zcard(project.out) == 0
    assert r.hget(project.stats, "requests_paused") == "1"


def uniques(r, k, now_ms):
    day = now_ms // 86_400_000
    return r.pfcount(k.uniques("downloaders", day)), r.pfcount(k.uniques("ips", day))


def counted_claim(conn, k, now_ms, under, downloader_counted, ip_counted):
    return scripts.claim(
        conn,
        k,
        now_ms=now_ms,
        downloader="https://dl.example/a b?c=%20#d",
        ip="10.1.2.3",
        wanted=1,
        counted_under=under,
        downloader_counted=downloader_counted,
        ip_counted=ip_counted,
    )


def test_claim_skips_the_pfadds_of_members_the_caller_counted_in_this_life(conn, project, r, names, now_ms):
    r.sadd(project.todo, *names)
    created = r.hget(project.settings, "created_ms")
    # Flags under the stored created_ms: both PFADDs skipped (the members, never added, stay
    # uncounted: proof that nothing ran), the claim itself unchanged.
    reply = counted_claim(conn, project, now_ms, created, True, True)
    assert reply.code == scripts.claim.codes.OK and len(reply.items) == 1
    assert uniques(r, project, now_ms) == (0, 0)
    # One fresh item: counted as requests_served_one, which the readers add to requests_served
    # and items_claimed (derived_counters), as they derive the total.
    assert r.hget(project.stats, "requests_served_one") == "1"
    assert not r.hexists(project.stats, "requests_served") and not r.hexists(project.stats, "items_claimed")
    assert not r.hexists(project.stats, "requests")
    totals = with_derived({f: int(v) for f, v in r.hgetall(project.stats).items()}, totals=True)
    assert (totals["requests"], totals["requests_served"], totals["items_claimed"]) == (1, 1, 1)
    assert "requests_served_one" not in totals
    # One flag: only the other member is counted.
    counted_claim(conn, project, now_ms, created, True, False)
    assert uniques(r, project, now_ms) == (0, 1)
    counted_claim(conn, project, now_ms, created, False, True)
    assert uniques(r, project, now_ms) == (1, 1)


def test_claim_ignores_counted_flags_from_another_life_of_the_project(conn, project, r, names, now_ms):
    r.sadd(project.todo, *names)
    created = r.hget(project.settings, "created_ms")
    for under in (str(int(created) - 1), "", created + "0"):
        r.delete(
            project.uniques("downloaders", now_ms // 86_400_000), project.uniques("ips", now_ms // 86_400_000)
        )
        counted_claim(conn, project, now_ms, under, True, True)
        assert uniques(r, project, now_ms) == (1, 1), under
    # A project stored without created_ms (made before it existed) never skips, even for ''.
    r.hdel(project.settings, "created_ms")
    r.delete(
        project.uniques("downloaders", now_ms // 86_400_000), project.uniques("ips", now_ms // 86_400_000)
    )
    counted_claim(conn, project, now_ms, "", True, True)
    assert uniques(r, project, now_ms) == (1, 1)


def test_a_one_item_claim_writes_what_a_many_item_claim_writes(conn, project, r, names, now_ms):
    # One fresh item takes the script's call-per-key path, more take the argument-list path:
    # both leave the same records (out, claims, the holder's count, the counters).
    r.sadd(project.todo, *names)
    r.hset(project.settings, "reclaim_ttl_s", "60")
    one = claim(conn, project, now_ms, wanted=1, downloader="bob", ip="10.0.0.9")
    many = claim(conn, project, now_ms + 1, wanted=2, downloader="carol", ip="10.0.0.8")
    assert one.code == many.code == scripts.claim.codes.OK and len(one.items) == 1 and len(many.items) == 2
    for reply, at, who in ((one, now_ms, "bob\t10.0.0.9\t1"), (many, now_ms + 1, "carol\t10.0.0.8\t1")):
        for item in reply.items:
            assert r.zscore(project.out, item) == at + 60_000
            assert r.hget(project.claims, item) == f"{who}\t{at}"
    assert not r.exists(project.reclaim_at)  # no longer written: `out` is scored by due time
    assert r.hgetall(project.downloader_claims) == {"bob": "1", "carol": "2"}
    stats = r.hgetall(project.stats)
    assert "requests" not in stats  # derived by the readers: the outcomes' sum
    # The one-item claim counts requests_served_one (served, and one item claimed), the other
    # requests_served and its items: the readers add them up (derived_counters).
    assert (stats["requests_served_one"], stats["requests_served"], stats["items_claimed"]) == ("1", "1", "2")
    assert "reclaims_served" not in stats and "items_reclaimed" not in stats
    totals = with_derived({f: int(v) for f, v in stats.items()}, totals=True)
    assert (totals["requests"], totals["requests_served"], totals["items_claimed"]) == (2, 2, 3)
    minute = r.hgetall(project.minute(now_ms // 60_000))
    assert "requests" not in minute and (minute["requests_served"], minute["requests_served_one"]) == (
        "1",
        "1",
    )
    assert "items_claimed" not in minute  # a total only: nothing reads it per minute
    assert with_derived({f: int(v) for f, v in minute.items()})["requests_served"] == 2
    assert "items_claimed" not in with_derived({f: int(v) for f, v in minute.items()})
    assert r.ttl(project.minute(now_ms // 60_000)) > 0


def test_each_refusal_counts_its_field_once_and_moves_nothing(conn, project, r, names, now_ms):
    r.sadd(project.todo, *names)
    r.hset(project.settings, mapping={"max_claims_per_downloader": "1", "claims_limit": "2"})

    minute = project.minute(now_ms // 60_000)

    def requests(key) -> int:
        return with_derived({f: int(v) for f, v in r.hgetall(key).items()}).get("requests", 0)

    def refused(code, field, **kw):
        before = r.hgetall(project.stats).get(field, "0")
        total, total_minute = requests(project.stats), requests(minute)
        todo, out = r.scard(project.todo), r.zcard(project.out)
        reply = claim(conn, project, now_ms, **kw)
        assert (reply.code, reply.items) == (code, [])
        assert r.hget(project.stats, field) == str(int(before) + 1)
        # One outcome counted, no other: the derived total grows by one in both hashes.
        assert (requests(project.stats), requests(minute)) == (total + 1, total_minute + 1)
        assert (r.scard(project.todo), r.zcard(project.out)) == (todo, out)

    assert claim(conn, project, now_ms, wanted=1).code == scripts.claim.codes.OK  # alice holds her one claim
    refused(scripts.claim.codes.NOTHING, "requests_capped")
    assert (
        claim(conn, project, now_ms, wanted=1, downloader="bob").code == scripts.claim.codes.OK
    )  # out is full
    refused(scripts.claim.codes.NOTHING, "requests_claims_limited", downloader="carol")
    r.hset(project.settings, mapping={"claims_limit": "0", "max_claims_per_downloader": "0"})
    r.delete(project.todo)
    refused(scripts.claim.codes.NOTHING, "requests_empty", downloader="carol")
    r.sadd(project.todo, "x")
    r.hset(project.settings, mapping={"rate_limit": "60", "rate_burst": "1"})
    assert claim(conn, project, now_ms, wanted=1, downloader="carol").code == scripts.claim.codes.OK
    r.sadd(project.todo, "y")
    refused(scripts.claim.codes.RATE_LIMITED, "requests_limited", downloader="carol")
    stats = r.hgetall(project.stats)
    assert requests(project.stats) == requests(minute) == 7 and stats["requests_served_one"] == "3"
    assert "requests" not in stats
