"""offload_stage-5.lua: items leave a queue for the offloading set, under the lease, one staging at a time."""

from tracker_core import scripts


def stage(conn, k, holder="m1", count=10):
    return scripts.offload_stage(conn, k, holder=holder, source="todo", source_key=k.todo, count=count)


def test_stage_reserves_a_number_and_takes_the_items(conn, project, r, names):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    assert stage(conn, project) == (scripts.offload_stage.codes.EMPTY, [])
    r.sadd(project.todo, *names)
    number, items = stage(conn, project)
    assert number == 1 and sorted(items) == sorted(names)
    assert not r.exists(project.todo) and r.smembers(project.offloading) == set(names)
    assert r.hget(project.segment_queues, "#staged") == "1 todo"
    r.sadd(project.todo, names[0])
    assert stage(conn, project).code == scripts.offload_stage.codes.PENDING
    assert stage(conn, project, holder="m2").code == scripts.offload_stage.codes.NOT_HOLDER
    assert r.smembers(project.todo) == {names[0]}
