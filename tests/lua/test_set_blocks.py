"""set_blocks-4.lua: a project's blocks and index are replaced unless they changed since read."""

from tracker_core import blocks, scripts


def test_set_blocks_replaces_and_refuses_a_stale_read(conn, project, r):
    own = ["name:bad-dl", "ip:10.0.0.0/8"]
    index = blocks.index_members(own, [])
    reply = scripts.set_blocks(conn, project, own_read=[], copy_read=[], own=own, copy=[], index=index)
    assert reply == scripts.set_blocks.codes.REPLACED
    assert r.smembers(project.blocked) == set(own) and set(r.zrange(project.blocked_index, 0, -1)) == set(
        index
    )
    stale = scripts.set_blocks(conn, project, own_read=[], copy_read=[], own=[], copy=[], index=[])
    assert stale == scripts.set_blocks.codes.CHANGED and r.smembers(project.blocked) == set(own)
