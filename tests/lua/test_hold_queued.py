"""hold_queued-2.lua: queued items a limit now matches go to the way-in set, if still queued."""

from tracker_core import scripts


def test_hold_queued_moves_only_what_is_still_queued(conn, project, r, names):
    r.sadd(project.todo, names[0])
    moved = scripts.hold_queued(
        conn, project, queue=project.todo, items=names[:2], held=["lim\0" + n for n in names[:2]]
    )
    assert moved == 1  # names[1] was not queued (claimed meanwhile): skipped, in no second place
    assert not r.exists(project.todo) and r.smembers(project.limited_in) == {"lim\0" + names[0]}
