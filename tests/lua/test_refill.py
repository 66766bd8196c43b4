"""refill-5.lua: a segment's items go back into their queue and the segment is unregistered."""

from tracker_core import script_calls
from tracker_core.reply_codes import Refill


def offloaded(conn, project, r, names):
    script_calls.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    r.sadd(project.todo, *names)
    number, items = script_calls.offload_stage(
        conn, project, holder="m1", source="todo", source_key=project.todo, count=10
    )
    script_calls.offload_commit(conn, project, holder="m1", number=number, count=len(items), source="todo")
    return number, items


def test_refill_brings_a_segment_back(conn, project, r, names):
    number, items = offloaded(conn, project, r, names)
    call = dict(holder="m1", number=number, queue="todo", queue_key=project.todo)
    assert script_calls.refill(conn, project, items=items[:-1], **call) == Refill.BAD_COUNT
    assert script_calls.refill(conn, project, items=items, **dict(call, queue="redo")) == Refill.WRONG_SOURCE
    assert not r.exists(project.todo)
    assert script_calls.refill(conn, project, items=items, **call) == len(names)
    assert r.smembers(project.todo) == set(names) and not r.hexists(project.segments, str(number))
    assert script_calls.refill(conn, project, items=items, **call) == Refill.NOT_REGISTERED
