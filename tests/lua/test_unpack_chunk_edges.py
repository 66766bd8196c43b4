"""UNPACK_CHUNK at the bound and one past it: offload_stage and offload_abort move every item."""

import pytest

from tracker_core import scripts
from tracker_core.scripts.constants import UNPACK_CHUNK


@pytest.mark.parametrize("count", [UNPACK_CHUNK, UNPACK_CHUNK + 1])
def test_stage_and_abort_move_a_chunk_and_one_more(conn, project, r, count):
    names = [f"item-{n}" for n in range(count)]
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    r.sadd(project.todo, *names)
    scripts.offload_stage(conn, project, holder="m1", source="todo", source_key=project.todo, count=count)
    assert r.scard(project.offloading) == count and not r.exists(project.todo)
    moved = scripts.offload_abort(
        conn, project, holder="m1", source="todo", source_key=project.todo, most=count
    )
    assert moved == (count, 0)
    assert r.smembers(project.todo) == set(names) and not r.exists(project.offloading)
