"""log_archive-4.lua: a durable log segment is registered and its entries trimmed, in one step."""

from tracker_core import scripts


def test_archive_registers_and_trims(conn, project, r):
    scripts.maintain_lease(conn, project, holder="m1", lease_ms=60_000)
    first = r.xadd(project.log, {"items": "https://example.com/a?b=%20#c"})
    last = r.xadd(project.log, {"items": "https://example.com/d e"})
    kept = r.xadd(project.log, {"items": "later"})
    r.hincrby(project.log_segments, "#next", 1)
    call = dict(number=1, first_id=first, last_id=last, entries=2)
    assert scripts.log_archive(conn, project, holder="m2", **call) == (
        scripts.log_archive.codes.NOT_HOLDER,
        0,
    )
    assert scripts.log_archive(conn, project, holder="m1", **call) == (
        scripts.log_archive.codes.REGISTERED,
        2,
    )
    assert [entry_id for entry_id, _ in r.xrange(project.log)] == [kept]
    assert r.hget(project.log_segments, "1") == f"{first} {last} 2"
    assert r.hget(project.log_segments, "#archived") == last
    assert scripts.log_archive(conn, project, holder="m1", **call) == (
        scripts.log_archive.codes.NOT_CONTINUATION,
        0,
    )
