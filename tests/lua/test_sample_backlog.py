"""sample_backlog-1.lua: the first sample of a minute wins; the minute hash gets its expiry."""

from tracker_core import scripts


def test_first_sample_of_the_minute_wins(conn, project, r):
    minute = 28_333_333
    assert (
        scripts.sample_backlog(conn, project, minute=minute, backlog=42, ttl_s=600)
        == scripts.sample_backlog.codes.STORED
    )
    assert (
        scripts.sample_backlog(conn, project, minute=minute, backlog=7, ttl_s=600)
        == scripts.sample_backlog.codes.ALREADY
    )
    assert r.hget(project.minute(minute), "backlog") == "42" and 0 < r.ttl(project.minute(minute)) <= 600
