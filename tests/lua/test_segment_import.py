"""segment_import-5.lua: an exported segment comes back once, as a segment of its queue."""

from tracker_core import scripts


def test_import_uses_the_ticket_once(conn, project, r):
    r.hset(project.segment_exports, "d1", "7 backfeed")
    assert (
        scripts.segment_import(conn, project, number=4, count=6, digest="d1")
        == scripts.segment_import.codes.NO_TICKET
    )
    assert (
        scripts.segment_import(conn, project, number=4, count=7, digest="d1")
        == scripts.segment_import.codes.IMPORTED
    )
    assert r.hget(project.segments, "4") == "7" and r.hget(project.segment_queues, "4") == "backfeed"
    assert not r.exists(project.segment_exports) and r.hget(project.stats, "items_imported") == "7"
    assert (
        scripts.segment_import(conn, project, number=5, count=7, digest="d1")
        == scripts.segment_import.codes.NO_TICKET
    )


def test_import_into_a_taken_number_changes_nothing(conn, project, r):
    r.hset(project.segment_exports, "d1", "7 todo")
    r.hset(project.segments, "4", 2)
    assert (
        scripts.segment_import(conn, project, number=4, count=7, digest="d1")
        == scripts.segment_import.codes.NUMBER_TAKEN
    )
    assert r.hget(project.segments, "4") == "2" and r.hexists(project.segment_exports, "d1")
