"""top_history-n.lua: the top downloaders' item counts get one point per interval and stream."""

from tracker_core import scripts

TIERS = ((600, 288, 172_800), (3600, 1440, 5_184_000))


def test_one_point_per_interval(conn, project, r, now_ms):
    assert (
        scripts.top_history(conn, project, now_ms=now_ms, top=1, tiers=TIERS)
        == scripts.top_history.codes.NOTHING_DUE
    )
    r.zadd(project.downloader_bytes, {"alice": 500, "bob": 100})
    r.hset(project.downloader_count, mapping={"alice": 5, "bob": 1})
    assert scripts.top_history(conn, project, now_ms=now_ms, top=1, tiers=TIERS) == 2
    ((_, fields),) = r.xrange(project.top_history(600))
    assert fields == {"alice": "5"}  # only the top one
    assert scripts.top_history(conn, project, now_ms=now_ms + 1000, top=1, tiers=TIERS) == 0
    assert scripts.top_history(conn, project, now_ms=now_ms + 600_000, top=1, tiers=TIERS) == 1
    assert r.xlen(project.top_history(600)) == 2 and r.xlen(project.top_history(3600)) == 1
