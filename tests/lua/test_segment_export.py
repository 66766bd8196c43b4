"""segment_export-4.lua: a segment leaves the project with a ticket to come back once."""

from tracker_core import scripts


def test_export_unregisters_and_leaves_a_ticket(conn, project, r):
    r.hset(project.segments, "3", 7)
    r.hset(project.segment_queues, "3", "backfeed")
    assert scripts.segment_export(conn, project, number=3, digest="d1") == 7
    assert not r.hexists(project.segments, "3") and not r.hexists(project.segment_queues, "3")
    assert (
        r.hget(project.segment_exports, "d1") == "7 backfeed"
        and r.hget(project.stats, "items_exported") == "7"
    )
    assert (
        scripts.segment_export(conn, project, number=3, digest="d1")
        == scripts.segment_export.codes.NOT_REGISTERED
    )
