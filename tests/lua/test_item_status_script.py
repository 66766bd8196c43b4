"""item_status-n.lua: where an item is, read atomically, through every place it can be."""

from tracker_core import scripts


def test_item_status_finds_queued_owned_claimed_and_nowhere(conn, project, r, names, now_ms, claimed):
    r.sadd(project.secondary, names[0])
    r.sadd(project.downloader_queue("dl-one"), names[1])
    r.sadd(project.downloader_queues, "dl-one")
    queued = scripts.item_status(conn, project, item=names[0], owners=["dl-one"])
    assert queued[:4] == (scripts.item_status.codes.OK, "todo", "secondary", "")
    owned = scripts.item_status(conn, project, item=names[1], owners=["dl-one"])
    assert owned[:3] == (scripts.item_status.codes.OK, "todo", "downloader:dl-one")
    nowhere = scripts.item_status(conn, project, item=names[2], owners=[])
    assert nowhere == (
        scripts.item_status.codes.OK,
        "",
        "",
        "",
        1,
        0,
        "",
        "",
    )  # one owner's queue went unlooked-at
    r.srem(project.secondary, names[0])
    claimed([names[0]])
    out = scripts.item_status(conn, project, item=names[0], owners=[])
    assert (out.status, out.detail, out.extra) == ("out", f"alice\t10.0.0.1\t1\t{now_ms}", "")
    assert float(out.out_score) > now_ms  # a four-field record's score is its due time


def test_item_status_of_an_unknown_project(conn, k):
    assert scripts.item_status(conn, k, item="x", owners=[]).code == scripts.item_status.codes.UNKNOWN_PROJECT
