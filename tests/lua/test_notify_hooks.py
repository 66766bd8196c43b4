"""notify_hooks-2.lua: hooks added up to the bound, removed with their figures."""

from tracker_core import keyspace, scripts

CODES = scripts.notify_hooks.codes


def test_add_up_to_the_bound_then_refused(conn, r):
    for i in range(3):
        assert (
            scripts.notify_hooks(conn, op="add", hook_id=f"{i:012x}", record="{}", max_hooks=3) == CODES.DONE
        )
    assert scripts.notify_hooks(conn, op="add", hook_id="f" * 12, record="{}", max_hooks=3) == CODES.FULL
    assert r.hlen(keyspace.NOTIFY_HOOKS) == 3 and not r.hexists(keyspace.NOTIFY_HOOKS, "f" * 12)
    assert (
        scripts.notify_hooks(conn, op="add", hook_id=f"{0:012x}", record="{}", max_hooks=9) == CODES.NO_CHANGE
    )


def test_remove_takes_the_figures_with_it(conn, r):
    scripts.notify_hooks(conn, op="add", hook_id="a" * 12, record="{}", max_hooks=3)
    r.hset(keyspace.NOTIFY_HOOK_STATS, mapping={"a" * 12 + ":delivered": 3, "b" * 12 + ":delivered": 1})
    assert scripts.notify_hooks(conn, op="remove", hook_id="a" * 12) == CODES.DONE
    assert r.hgetall(keyspace.NOTIFY_HOOK_STATS) == {"b" * 12 + ":delivered": "1"}
    assert scripts.notify_hooks(conn, op="remove", hook_id="a" * 12) == CODES.NO_CHANGE
