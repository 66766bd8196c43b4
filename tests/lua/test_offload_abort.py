"""offload_abort-4.lua: staged items go back where they came from, a chunk at a time."""

from tracker_core import scripts


def test_abort_puts_the_staged_items_back(conn, project, r, names):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    r.sadd(project.todo, *names)
    scripts.offload_stage(conn, project, holder="m1", source="todo", source_key=project.todo, count=10)
    wrong = scripts.offload_abort(conn, project, holder="m1", source="redo", source_key=project.redo, most=10)
    assert wrong == (scripts.offload_abort.codes.WRONG_SOURCE, 0) and r.scard(project.offloading) == len(
        names
    )
    first = scripts.offload_abort(conn, project, holder="m1", source="todo", source_key=project.todo, most=2)
    assert first == (2, len(names) - 2)
    last = scripts.offload_abort(conn, project, holder="m1", source="todo", source_key=project.todo, most=10)
    assert last == (len(names) - 2, 0)
    assert r.smembers(project.todo) == set(names) and not r.exists(project.offloading)
    assert not r.hexists(project.segment_queues, "#staged")
