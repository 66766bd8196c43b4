"""maintain_lease-1.lua: one holder takes, renews and gives up a project's maintenance lease."""

from tracker_core import scripts


def test_one_holder_at_a_time(conn, project, r):
    assert (
        scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
        == scripts.maintain_lease.codes.HELD
    )
    assert r.get(project.maintain_lease) == "m1" and 0 < r.pttl(project.maintain_lease) <= 60_000
    assert (
        scripts.maintain_lease(conn, project, holder="m2", lease_ms=60_000)
        == scripts.maintain_lease.codes.NOT_HELD
    )
    assert scripts.maintain_lease(conn, project, holder="m2", lease_ms=1, release=True) == (
        scripts.maintain_lease.codes.NOT_HELD
    )
    assert r.get(project.maintain_lease) == "m1"
    assert (
        scripts.maintain_lease(conn, project, holder="m1", lease_ms=1, release=True)
        == scripts.maintain_lease.codes.HELD
    )
    assert not r.exists(project.maintain_lease)
