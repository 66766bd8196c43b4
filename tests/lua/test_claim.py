"""claim-22.lua through script_calls.claim: items leave the queues for `out`, atomically."""

from tracker_core import blocks, script_calls
from tracker_core.keys import ProjectKeys
from tracker_core.reply_codes import Claim


def claim(conn, k, now_ms, wanted=2, downloader="alice", ip="10.1.2.3"):
    return script_calls.claim(
        conn, k, now_ms=now_ms, downloader=downloader, ip=ip, wanted=wanted, ip_key=blocks.ip_key(ip)
    )


def test_claim_moves_items_from_todo_to_out(conn, project, r, names, now_ms):
    r.sadd(project.todo, *names)
    reply = claim(conn, project, now_ms)
    assert reply.code == Claim.OK and reply.settings_age == 1
    assert len(reply.items) == 2 and set(reply.items) <= set(names)
    assert r.zrange(project.out, 0, -1, withscores=True) == sorted((n, float(now_ms)) for n in reply.items)
    assert {n: r.hget(project.claims, n) for n in reply.items} == dict.fromkeys(
        reply.items, "alice\t10.1.2.3\t1"
    )
    assert r.smembers(project.todo) == set(names) - set(reply.items)
    assert r.hget(project.stats, "items_claimed") == "2"


def test_claim_refusals_change_no_queue(conn, project, r, names, now_ms, k):
    assert claim(conn, ProjectKeys("nowhere"), now_ms).code == Claim.UNKNOWN_PROJECT
    assert claim(conn, project, now_ms).code == Claim.NOTHING  # nothing queued
    r.sadd(project.todo, *names)
    r.hset(project.settings, "paused", "1")
    assert claim(conn, project, now_ms) == (Claim.NOTHING, 1, [])
    assert r.scard(project.todo) == len(names) and r.zcard(project.out) == 0
    assert r.hget(project.stats, "requests_paused") == "1"
