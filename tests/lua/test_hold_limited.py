"""hold_limited-4.lua: held items move from their way-in set to the held zset; the limit is ready."""

from tracker_core import scripts


def test_hold_limited_files_the_way_in_set(conn, project, r, names):
    entries = {"lim\0" + n for n in names}
    r.sadd(project.limited_in, *entries)
    r.hset(project.limit_tat, "lim", "1234")
    assert scripts.hold_limited(conn, project, most=100) == len(names)
    assert set(r.zrange(project.limited, 0, -1)) == entries and not r.exists(project.limited_in)
    assert r.zscore(project.limits_ready, "lim") == 1234 and not r.exists(project.limit_tat)
    assert scripts.hold_limited(conn, project, most=100) == scripts.hold_limited.codes.NONE_WAITING


def test_hold_limited_refuses_a_bad_count(conn, project, r, names):
    r.sadd(project.limited_in, "lim\0" + names[0])
    assert scripts.hold_limited(conn, project, most=0) == scripts.hold_limited.codes.BAD_ARGUMENT
    assert r.scard(project.limited_in) == 1
