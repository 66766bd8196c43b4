"""offload_commit-5.lua: a durable segment file is registered and its staged items dropped."""

from tracker_core import scripts


def test_commit_registers_the_staged_set(conn, project, r, names):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    r.sadd(project.todo, *names)
    number, items = scripts.offload_stage(
        conn, project, holder="m1", source="todo", source_key=project.todo, count=10
    )
    commit = dict(holder="m1", number=number, source="todo")
    assert (
        scripts.offload_commit(conn, project, count=len(items) + 1, **commit)
        == scripts.offload_commit.codes.STAGED_CHANGED
    )
    assert scripts.offload_commit(conn, project, count=len(items), **dict(commit, holder="m2")) == (
        scripts.offload_commit.codes.NOT_HOLDER
    )
    assert r.scard(project.offloading) == len(names)
    assert (
        scripts.offload_commit(conn, project, count=len(items), **commit)
        == scripts.offload_commit.codes.COMMITTED
    )
    assert r.hget(project.segments, str(number)) == str(len(names))
    assert r.hget(project.segment_queues, str(number)) == "todo"
    assert not r.exists(project.offloading) and not r.hexists(project.segment_queues, "#staged")
    assert r.hget(project.stats, "items_offloaded") == str(len(names))
