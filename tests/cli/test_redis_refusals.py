"""A command Redis itself refuses (out of memory, a read-only replica, protected mode's DENIED)
ends in one line and exit 1, never a traceback, and changes nothing."""

import contextlib

import pytest

from tracker_core.admin import item_verbs, project_verbs

P = "refused"


@contextlib.contextmanager
def full(r):
    """Redis at its memory limit with noeviction: every write and every script that writes fails;
    the limit and policy it had come back afterwards."""
    before = r.config_get("maxmemory")["maxmemory"], r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        yield
    finally:
        r.config_set("maxmemory", before[0])
        r.config_set("maxmemory-policy", before[1])


@pytest.fixture
def full_redis(r):
    with full(r):
        yield


def test_a_script_refused_for_memory_is_one_line_and_exit_1(cli, r, full_redis):
    result = cli("project", "create", P)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    line = result.output.strip()
    assert line.startswith("Error: Redis at ") and "refused" in line and "maxmemory" in line
    assert "\n" not in line and "Traceback" not in result.output
    assert not r.exists(f"{{{P}}}:settings")


def test_items_add_on_a_full_redis_changes_nothing(cli, r, admin, tmp_path):
    project_verbs.create(admin, P)
    names = tmp_path / "names.txt"
    names.write_text("https://example.com/a b?c=%41#d\n")
    with full(r):
        result = cli("items", "add", P, str(names))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "refused" in result.output
    assert item_verbs.count(admin, P, "todo")["count"] == 0
