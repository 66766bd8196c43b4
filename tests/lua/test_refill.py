"""refill-5.lua: a segment's items go back into their queue and the segment is unregistered."""

from tracker_core import scripts


def offloaded(conn, project, r, names):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    r.sadd(project.todo, *names)
    number, items = scripts.offload_stage(
        conn, project, holder="m1", source="todo", source_key=project.todo, count=10
    )
    scripts.offload_commit(conn, project, holder="m1", number=number, count=len(items), source="todo")
    return number, items


def test_refill_brings_a_segment_back(conn, project, r, names):
    number, items = offloaded(conn, project, r, names)
    call = dict(holder="m1", number=number, queue="todo", queue_key=project.todo)
    assert scripts.refill(conn, project, items=items[:-1], **call) == scripts.refill.codes.BAD_COUNT
    assert (
        scripts.refill(conn, project, items=items, **dict(call, queue="redo"))
        == scripts.refill.codes.WRONG_SOURCE
    )
    assert not r.exists(project.todo)
    assert scripts.refill(conn, project, items=items, **call) == len(names)
    assert r.smembers(project.todo) == set(names) and not r.hexists(project.segments, str(number))
    assert scripts.refill(conn, project, items=items, **call) == scripts.refill.codes.NOT_REGISTERED


def test_a_segment_larger_than_one_unpack_chunk_moves_whole(conn, project, r):
    # Staging, aborting and refilling spread their items over several commands (UNPACK_CHUNK
    # each, script_constants): none may be lost at a chunk's edge.
    names = [f"https://example.com/{n}?page=%20{n}#x" for n in range(4501)]
    r.sadd(project.todo, *names)
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    call = dict(holder="m1", source="todo", source_key=project.todo)
    number, items = scripts.offload_stage(conn, project, count=len(names), **call)
    assert r.scard(project.offloading) == len(names) and sorted(items) == sorted(names)
    assert scripts.offload_abort(conn, project, most=len(names), **call) == (len(names), 0)
    assert r.scard(project.todo) == len(names)
    number, items = scripts.offload_stage(conn, project, count=len(names), **call)
    scripts.offload_commit(conn, project, holder="m1", number=number, count=len(items), source="todo")
    refill = dict(holder="m1", number=number, queue="todo", queue_key=project.todo)
    assert scripts.refill(conn, project, items=items, **refill) == len(names)
    assert r.smembers(project.todo) == set(names)


def test_refill_below_a_size_only(conn, project, r, names):
    # The maintainer's pass and its refiller thread may both refill a queue: the script refills
    # only while the queue is under the size the caller refills it to, in the same step.
    number, items = offloaded(conn, project, r, names)
    r.sadd(project.todo, "a", "b", "c")
    call = dict(holder="m1", number=number, queue="todo", queue_key=project.todo, items=items)
    assert scripts.refill(conn, project, below=3, **call) == scripts.refill.codes.ENOUGH
    assert r.scard(project.todo) == 3 and r.hexists(project.segments, str(number))
    assert not r.hexists(project.stats, "items_refilled")
    assert scripts.refill(conn, project, below=4, **call) == len(names)
    assert r.scard(project.todo) == 3 + len(names) and not r.hexists(project.segments, str(number))
