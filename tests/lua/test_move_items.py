"""move_items-5.lua: named items move between queues if still there; held ones to the way-in set."""

from tracker_core import scripts
from tracker_core.keyspace import ProjectKeys


def test_move_items_moves_what_is_still_there(conn, project, r, names):
    r.sadd(project.todo, *names[:2])
    moved = scripts.move_items(
        conn,
        project,
        source=project.todo,
        target=project.secondary,
        owner="",
        items=names,
        held=["", "lim\0" + names[1], ""],
    )
    assert moved == 2  # names[2] was not in todo
    assert r.smembers(project.secondary) == {names[0]} and r.smembers(project.limited_in) == {
        "lim\0" + names[1]
    }
    assert not r.exists(project.todo)


def test_move_into_a_downloaders_queue_registers_it(conn, project, r, names):
    r.sadd(project.todo, names[0])
    target = project.downloader_queue("dl-one")
    assert (
        scripts.move_items(
            conn, project, source=project.todo, target=target, owner="dl-one", items=names[:1], held=[""]
        )
        == 1
    )
    assert r.smembers(target) == {names[0]} and r.smembers(project.downloader_queues) == {"dl-one"}


def test_move_in_an_unknown_project(conn, r, names):
    k = ProjectKeys("nowhere")
    r.sadd(k.todo, names[0])
    assert (
        scripts.move_items(conn, k, source=k.todo, target=k.redo, owner="", items=names[:1], held=[""])
        == scripts.move_items.codes.UNKNOWN_PROJECT
    )
    assert r.scard(k.todo) == 1
