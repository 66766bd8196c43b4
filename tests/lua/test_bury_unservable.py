"""bury_unservable-7.lua: a claim the client cannot receive goes from `out` to `dead`."""

import json

from tracker_core import scripts


def test_bury_takes_the_downloaders_claim_to_dead(conn, project, r, names, now_ms, claimed):
    claimed([names[0]])
    other = scripts.bury_unservable(
        conn, project, now_ms=now_ms, downloader="bob", reasons=[names[0], "holds NUL"]
    )
    assert other == (scripts.bury_unservable.codes.OK, 0) and r.zcard(project.out) == 1  # not bob's claim
    reply = scripts.bury_unservable(
        conn, project, now_ms=now_ms, downloader="alice", reasons=[names[0], "holds NUL"]
    )
    assert reply == (scripts.bury_unservable.codes.OK, 1)
    assert r.zcard(project.out) == 0 and r.hlen(project.claims) == 0
    assert json.loads(r.hget(project.dead, names[0]))["reason"] == "holds NUL"
    assert r.hget(project.stats, "items_unservable") == "1"


def test_bury_in_an_unknown_project(conn, k, now_ms):
    assert scripts.bury_unservable(conn, k, now_ms=now_ms, downloader="a", reasons=[]).code == -1
