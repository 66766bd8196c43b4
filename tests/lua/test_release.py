"""release-8.lua: claims go back to todo, or to the way-in set of held items; a stale age refuses."""

from tracker_core import scripts


def test_release_puts_claims_back_and_holds_the_limited(conn, project, r, names, now_ms, claimed):
    items = claimed(names[:2])
    reply = scripts.release(
        conn, project, now_ms=now_ms, downloader="alice", age="1", items=items, held=["", "lim\0" + items[1]]
    )
    assert reply == (scripts.release.codes.OK, 1, 2, 0, 1)
    assert r.smembers(project.todo) == {items[0]} and r.smembers(project.limited_in) == {"lim\0" + items[1]}
    assert r.zcard(project.out) == 0 and r.hget(project.stats, "items_released") == "2"


def test_release_refuses_a_stale_age_and_ignores_other_holders(conn, project, r, names, now_ms, claimed):
    items = claimed(names[:2])
    stale = scripts.release(conn, project, now_ms=now_ms, downloader="", age="7", items=items, held=["", ""])
    assert stale == (scripts.release.codes.STALE_AGE, 1, 0, 0, 0) and r.zcard(project.out) == 2
    other = scripts.release(
        conn, project, now_ms=now_ms, downloader="bob", age="", items=items, held=["", ""]
    )
    assert (other.released, other.ignored) == (0, 2) and r.zcard(project.out) == 2
