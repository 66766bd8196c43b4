"""bloom_add-n.lua: a batch's unseen items are queued and marked seen; seen ones are dropped."""

from tracker_core import bloom, script_calls
from tracker_core.reply_codes import BloomAdd


def add(conn, k, entries, secret_digest="", bound=0, last_capacity=None):
    fields = script_calls.bloom_configure(
        conn, k, capacity=1000, fp_rate="0.001", growth=2, tightening="0.5", chunk_bits=4096, replace=False
    )
    plan = bloom.Plan(k, bloom.Geometry.from_redis(fields))
    wired = [e.encode() for e in entries]
    return script_calls.bloom_add(
        conn,
        k,
        chunk_keys=plan.chunk_keys,
        target=k.todo,
        counted=k.limited_in,
        layers=len(plan.layers),
        last_capacity=plan.layers[-1].capacity if last_capacity is None else last_capacity,
        owner="",
        secret_digest=secret_digest,
        shard="",
        new_field="items_added",
        seen_field="items_duplicate",
        count=len(entries),
        bound=bound,
        ks=plan.ks,
        hashed=bloom.script_args(wired, wired, plan.hash_plan),
    )


def test_bloom_add_queues_each_item_once(conn, project, r, names):
    assert add(conn, project, names[:2]) == (BloomAdd.OK, 2, 0)
    assert r.smembers(project.todo) == set(names[:2])
    r.delete(project.todo)  # claimed and done since: the filter still knows them
    assert add(conn, project, names) == (BloomAdd.OK, 1, 2)
    assert r.smembers(project.todo) == {names[2]}
    assert r.hget(project.stats, "items_added") == "3" and r.hget(project.stats, "items_duplicate") == "2"


def test_bloom_add_refusals_queue_nothing(conn, project, r, names):
    assert add(conn, project, names, secret_digest="no-such-secret").code == BloomAdd.WRONG_SECRET
    assert add(conn, project, names, bound=1).code == BloomAdd.FULL
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"


def test_a_capacity_that_is_not_a_number_refuses_before_any_write(conn, project, r, names):
    """ARGV[2] (the last layer's capacity) used to be read after the items were queued, so a bad
    one failed the script with its writes kept."""
    import pytest

    from tracker_core.scripts import ScriptError

    with pytest.raises(ScriptError, match="capacity"):
        add(conn, project, names, last_capacity="not-a-number")
    assert not r.exists(project.todo) and r.hget(project.bloom, "items") == "0"
