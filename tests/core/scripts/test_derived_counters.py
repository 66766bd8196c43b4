"""A project's requests are the sum of the claim outcomes (tracker_core.scripts.derived_counters): the claim
script keeps no total, and every reader derives it the same way, whatever a hash stored before."""

from __future__ import annotations

import re

from support.paths import ROOT
from tracker_core.scripts.derived_counters import REQUEST_OUTCOMES, with_derived

CLAIM = ROOT / "src" / "tracker_core" / "lua" / "claim-21.lua"


def test_the_outcomes_are_exactly_the_claim_scripts_request_fields():
    counted = set(re.findall(r"'(requests_[a-z_]+)'", CLAIM.read_text()))
    assert counted == set(REQUEST_OUTCOMES)
    assert not re.search(r"bump\([^)]*'requests'", CLAIM.read_text())  # no total written


def test_with_derived_sums_the_outcomes_over_a_stored_total():
    counts = {"requests": 100, "requests_served": 3, "requests_empty": 2, "items_done": 9}
    assert with_derived(counts) is counts
    assert counts == {"requests": 5, "requests_served": 3, "requests_empty": 2, "items_done": 9}
    every = {field: 1 for field in REQUEST_OUTCOMES}
    assert with_derived(every)["requests"] == len(REQUEST_OUTCOMES)


def test_counts_without_outcomes_get_no_total():
    assert with_derived({"items_done": 4, "backlog": 7}) == {"items_done": 4, "backlog": 7}
    assert with_derived({}) == {}
    # An outdated client's 455 is refused before any claim: not a request of the project.
    assert with_derived({"requests_outdated": 2}) == {"requests_outdated": 2}


def test_engine_counts_and_the_statistics_read_the_derived_total(engine, admin, r):
    from tracker_core.admin import item_verbs, project_verbs

    project_verbs.create(admin, "p")
    item_verbs.add(admin, "p", ["https://example.org/a?b=1#c", "https://example.org/d e"])
    k = engine.keys("p")
    r.hset(k.stats, "requests", 1000)  # a total stored by an older claim script: not read
    assert engine.claim("p", "alice", "10.0.0.1", 2)[0] == 200
    assert engine.claim("p", "alice", "10.0.0.1", 1)[0] == 404  # empty
    counters = engine.counts("p")["counters"]
    assert (counters["requests"], counters["requests_served"], counters["requests_empty"]) == (2, 1, 1)


def test_rtt_count_is_the_sum_of_the_rtt_buckets():
    counts = {"rtt_count": 50, "rtt_le_5": 2, "rtt_le_inf": 1, "rtt_sum_ms": 9000}
    assert with_derived(counts)["rtt_count"] == 3  # a stored count is not read
    assert with_derived({"rtt_sum_ms": 0}) == {"rtt_sum_ms": 0}  # no bucket: no count added


def test_the_done_script_stores_no_rtt_count():
    done = (ROOT / "src" / "tracker_core" / "lua" / "done-20.lua").read_text()
    assert "'rtt_count'" not in done and "rtt_le_" in done


def test_one_item_claims_count_as_served_and_as_claimed_in_the_totals_only():
    # A totals hash holding both kinds: claims of one fresh item (requests_served_one) and the
    # others (an older tracker's, or multi-item ones), which count served and items apart.
    stored = {"requests_served_one": 5, "requests_served": 2, "items_claimed": 7, "requests_empty": 1}
    totals = with_derived(dict(stored), totals=True)
    assert totals == {"requests": 8, "requests_served": 7, "items_claimed": 12, "requests_empty": 1}
    minute = with_derived({"requests_served_one": 5, "items_done": 3})
    assert minute == {"requests": 5, "requests_served": 5, "items_done": 3}  # no items_claimed per minute
    # A fresh project's totals: only one-item claims so far.
    assert with_derived({"requests_served_one": 4}, totals=True) == {
        "requests": 4,
        "requests_served": 4,
        "items_claimed": 4,
    }


def test_one_item_dones_count_as_an_item_a_bucket_and_in_the_totals_a_call():
    # A totals hash holding both kinds: dones of one item with an RTT (done_one_le_B) and the
    # others (an older tracker's, several items, no RTT), counted field by field.
    stored = {"done_one_le_5": 3, "done_one_le_inf": 1, "items_done": 4, "rtt_le_5": 2, "done_requests": 2}
    assert with_derived(dict(stored), totals=True) == {
        "items_done": 8,
        "rtt_le_5": 5,
        "rtt_le_inf": 1,
        "rtt_count": 6,
        "done_requests": 6,
    }
    # A minute counts no calls: the field adds to the items and the bucket only.
    assert with_derived({"done_one_le_30": 2, "bytes_done": 10}) == {
        "items_done": 2,
        "rtt_le_30": 2,
        "rtt_count": 2,
        "bytes_done": 10,
    }
