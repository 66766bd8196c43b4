"""uploaded-3.lua: an upload is logged in the capped uploads stream and counted."""

from tracker_core import scripts


def test_uploaded_logs_and_counts(conn, project, r, names, now_ms):
    reply = scripts.uploaded(conn, project, now_ms=now_ms, uploader="alice", item=names[0], server="up1")
    assert reply == (scripts.uploaded.codes.OK, 1)
    ((_, fields),) = r.xrange(project.uploads)
    assert (fields["uploader"], fields["item"], fields["server"]) == ("alice", names[0], "up1")
    assert r.hget(project.stats, "uploads") == "1"


def test_uploaded_for_an_unknown_project_writes_nothing(conn, k, r, now_ms):
    reply = scripts.uploaded(conn, k, now_ms=now_ms, uploader="a", item="x", server="s")
    assert reply.code == scripts.uploaded.codes.UNKNOWN_PROJECT and not r.exists(k.uploads)
