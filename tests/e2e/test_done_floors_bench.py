"""benchmarks/claim_cost_breakdown.py's done floors do what they are measured as: the item's move
that the real done makes (and, for moves_and_log, its log entry), nothing less. A floor that
skipped part of the move would make the done's counters look dearer than they are."""

import pytest

from claim_cost_breakdown import DONE_FLOORS
from tracker_core import scripts
from tracker_core.admin import project_verbs
from tracker_core.scripts import SCRIPTS

ITEM = "https://example.com/a b/?q=%20x#frag"


def place_after_done(r, engine, clock, script_source: str | None) -> dict:
    """Claim ITEM as dl7, report it done by dl7 with the real script (None) or SCRIPT_SOURCE, and
    return where the item and its claim ended up."""
    k = engine.keys("p")
    r.sadd(k.todo, ITEM)
    assert engine.claim("p", "dl7", "10.0.0.7", 1)[1] == [ITEM]
    clock.advance(3)
    now_ms = engine._now_ms()
    keys = scripts.done.keys(k, downloader="dl7", now_ms=now_ms)
    argv = scripts.done.argv(
        k,
        now_ms=now_ms,
        downloader="dl7",
        version="1.2",
        item_id="{}",
        ip="10.0.0.7",
        domain_bytes=["example.com", 5000],
        items=[ITEM],
    )
    reply = r.eval(script_source or SCRIPTS["done"].source, len(keys), *keys, *argv)
    assert reply[0] == 200 and reply[2] == 1  # one new item
    log = r.xrange(k.log)
    return {
        "done": r.smembers(k.done),
        "out": r.zrange(k.out, 0, -1),
        "claims": r.hgetall(k.claims),
        "holder_count": r.hget(k.downloader_claims, "dl7"),
        "log": [entry for _, entry in log],
    }


@pytest.mark.parametrize("floor", sorted(DONE_FLOORS))
def test_a_done_floor_moves_the_item_as_the_real_done_does(admin, r, engine, clock, floor):
    project_verbs.create(admin, "p")
    real = place_after_done(r, engine, clock, None)
    r.delete(engine.keys("p").done, engine.keys("p").log)
    floored = place_after_done(r, engine, clock, DONE_FLOORS[floor][1])
    for place in ("done", "out", "claims", "holder_count"):
        assert floored[place] == real[place], place
    assert real["done"] == {ITEM} and real["out"] == [] and real["holder_count"] is None
    if floor == "moves_and_log":
        (entry,), (real_entry,) = floored["log"], real["log"]
        assert real_entry["items"] == ITEM and real_entry["domains"] == "example.com\0" + "5000"
        same = ("downloader", "ip", "items", "bytes", "domains", "version", "id")
        assert {f: entry[f] for f in same} == {f: real_entry[f] for f in same}
        assert entry["rtt"] == "3000"  # what counters could be derived from afterwards
    else:
        assert floored["log"] == []
