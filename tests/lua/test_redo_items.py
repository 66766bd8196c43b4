"""redo_items-n.lua: done items are re-queued on purpose; a stale age or owner list refuses."""

from tracker_core import scripts


def redo(conn, k, names, age="1", owners=()):
    return scripts.redo_items(
        conn,
        k,
        age=age,
        target=k.todo,
        owner="",
        even_if_offloaded=False,
        owners=list(owners),
        items=names,
        held=[""] * len(names),
        seen=[True] * len(names),
    )


def test_redo_requeues_done_items(conn, project, r, names):
    r.sadd(project.done, names[0])
    r.sadd(project.secondary, names[1])
    r.hset(project.stats, "items_done", 5)
    reply = redo(conn, project, names[:2])
    assert (reply.code, reply.from_done, reply.queued) == (scripts.redo_items.codes.OK, 1, 1)
    assert reply.counts()["from_done"] == 1
    assert r.smembers(project.todo) == {names[0]} and not r.exists(project.done)
    assert r.hget(project.stats, "items_done") == "4"


def test_redo_refusals_change_nothing(conn, project, r, names):
    r.sadd(project.done, names[0])
    assert redo(conn, project, names[:1], age="9").code == scripts.redo_items.codes.STALE_AGE
    assert (
        redo(conn, project, names[:1], owners=["dl-unknown"]).code == scripts.redo_items.codes.OWNERS_CHANGED
    )
    assert r.smembers(project.done) == {names[0]} and not r.exists(project.todo)
