"""sample_backlog-1.lua: the first sample of a minute wins; the minute hash gets its expiry."""

from tracker_core import script_calls
from tracker_core.reply_codes import SampleBacklog


def test_first_sample_of_the_minute_wins(conn, project, r):
    minute = 28_333_333
    assert (
        script_calls.sample_backlog(conn, project, minute=minute, backlog=42, ttl_s=600)
        == SampleBacklog.STORED
    )
    assert (
        script_calls.sample_backlog(conn, project, minute=minute, backlog=7, ttl_s=600)
        == SampleBacklog.ALREADY
    )
    assert r.hget(project.minute(minute), "backlog") == "42" and 0 < r.ttl(project.minute(minute)) <= 600
