"""refill_watch-2.lua: the lease holder sets (or clears) the settings field that makes claims ask
for a refill; nobody else can, it never creates a project, and it stores only what claims read."""

from tracker_core import scripts
from tracker_core.scripts.constants import REFILL_WATCH_FIELD


def watch(conn, k, value, holder="m1"):
    return scripts.refill_watch(conn, k, holder=holder, value=value)


def test_the_holder_sets_and_clears_the_field_without_touching_the_age(conn, project, r):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    age = r.hget(project.settings, "settings_age")
    assert watch(conn, project, str(5000 * 16 + 1 + 2)) == scripts.refill_watch.codes.SET  # todo and backfeed
    assert r.hget(project.settings, REFILL_WATCH_FIELD) == "80003"
    assert watch(conn, project, "") == scripts.refill_watch.codes.SET
    assert not r.hexists(project.settings, REFILL_WATCH_FIELD)
    # No setting changed: no process reloads its settings for it.
    assert r.hget(project.settings, "settings_age") == age


def test_only_the_lease_holder_writes(conn, project, r):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    assert watch(conn, project, "161", holder="m2") == scripts.refill_watch.codes.NOT_HOLDER
    assert not r.hexists(project.settings, REFILL_WATCH_FIELD)
    r.hset(project.settings, REFILL_WATCH_FIELD, "161")
    assert watch(conn, project, "", holder="m2") == scripts.refill_watch.codes.NOT_HOLDER
    assert r.hget(project.settings, REFILL_WATCH_FIELD) == "161"


def test_a_deleted_project_is_not_made_again(conn, k, r):
    # The maintainer may write after a delete it has not seen yet: a settings hash made here
    # would be a project again (its existence is what makes a project exist).
    scripts.maintain_lease(conn, k, holder="m1", lease_ms=60_000)
    assert watch(conn, k, "161") == scripts.refill_watch.codes.UNKNOWN_PROJECT
    assert not r.exists(k.settings)


def test_a_value_claims_cannot_read_is_refused(conn, project, r):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    # No queue bit (nothing to watch: the field is cleared instead), a sign, a point, an
    # exponent, spaces, text, or more digits than a Lua number holds exactly.
    for bad in ("160", "0", "-161", "161.0", "1e3", " 161", "161 ", "todo", "1" * 16):
        assert watch(conn, project, bad) == scripts.refill_watch.codes.BAD_VALUE, bad
    assert not r.hexists(project.settings, REFILL_WATCH_FIELD)
