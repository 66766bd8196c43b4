"""requeue_dead-5.lua: dead items go back to a queue (held ones to the way-in set), once."""

from tracker_core import scripts


def test_requeue_dead_puts_dead_items_back_once(conn, project, r, names):
    r.hset(project.dead, mapping={names[0]: "{}", names[1]: "{}"})
    call = dict(target=project.todo, owner="", items=names, held=["", "lim\0" + names[1], ""])
    assert scripts.requeue_dead(conn, project, **call) == 2  # names[2] is not dead
    assert r.smembers(project.todo) == {names[0]} and r.smembers(project.limited_in) == {"lim\0" + names[1]}
    assert not r.exists(project.dead) and r.hget(project.stats, "items_requeued_dead") == "2"
    assert scripts.requeue_dead(conn, project, **call) == 0
