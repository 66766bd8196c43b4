"""rollup_hour-61.lua: an hour's minute counters are summed into its hour hash, once."""

from tracker_core import scripts


def test_rollup_sums_once(conn, project, r):
    hour = 472_222
    r.hset(project.minute(hour * 60), mapping={"items_done": 3, "backlog": 10})
    r.hset(project.minute(hour * 60 + 59), mapping={"items_done": 4, "backlog": 8})
    assert scripts.rollup_hour(conn, project, hour=hour, ttl_s=3600) == scripts.rollup_hour.codes.WRITTEN
    assert r.hgetall(project.hour(hour)) == {"minutes": "2", "items_done": "7", "backlog": "8"}
    r.hset(project.minute(hour * 60 + 1), "items_done", 100)
    assert scripts.rollup_hour(conn, project, hour=hour, ttl_s=3600) == scripts.rollup_hour.codes.ALREADY
    assert r.hget(project.hour(hour), "items_done") == "7" and 0 < r.ttl(project.hour(hour)) <= 3600
