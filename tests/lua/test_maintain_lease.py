"""maintain_lease-1.lua: one holder takes, renews and gives up a project's maintenance lease."""

from tracker_core import script_calls
from tracker_core.reply_codes import MaintainLease


def test_one_holder_at_a_time(conn, project, r):
    assert script_calls.maintain_lease(conn, project, holder="m1", lease_ms=60_000) == MaintainLease.HELD
    assert r.get(project.maintain_lease) == "m1" and 0 < r.pttl(project.maintain_lease) <= 60_000
    assert script_calls.maintain_lease(conn, project, holder="m2", lease_ms=60_000) == MaintainLease.NOT_HELD
    assert script_calls.maintain_lease(conn, project, holder="m2", lease_ms=1, release=True) == (
        MaintainLease.NOT_HELD
    )
    assert r.get(project.maintain_lease) == "m1"
    assert (
        script_calls.maintain_lease(conn, project, holder="m1", lease_ms=1, release=True)
        == MaintainLease.HELD
    )
    assert not r.exists(project.maintain_lease)
