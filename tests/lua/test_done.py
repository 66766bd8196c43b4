"""done-20.lua through script_calls.done: a claimed item becomes done once; a repeat counts."""

from tracker_core import script_calls
from tracker_core.keys import ProjectKeys
from tracker_core.reply_codes import Done


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
    first = script_calls.done(conn, project, **call)
    assert first == (Done.OK, 1, 1, 0, 0, 0, 0)
    assert r.sismember(project.done, names[0]) and r.zcard(project.out) == 0 and r.hlen(project.claims) == 0
    assert (
        r.hget(project.downloader_count, "alice") == "1"
        and r.zscore(project.downloader_bytes, "alice") == 300
    )
    assert r.hget(project.stats, "rtt_le_5") == "1"  # claimed 5 s before
    again = script_calls.done(conn, project, **call)
    assert (again.new, again.repeated) == (0, 1)
    assert r.hget(project.downloader_count, "alice") == "1"


def test_done_for_an_unknown_project_or_a_name_found_nowhere(conn, project, r, names, now_ms, k):
    call = dict(
        now_ms=now_ms, downloader="bob", version="", item_id="", ip="", domain_bytes=[], items=names[:1]
    )
    assert script_calls.done(conn, ProjectKeys("nowhere"), **call).code == Done.UNKNOWN_PROJECT
    reply = script_calls.done(conn, project, **call)
    assert (reply.new, reply.unknown) == (0, 1)
    assert r.scard(project.done) == 0 and r.xlen(project.bad_dones) == 1
