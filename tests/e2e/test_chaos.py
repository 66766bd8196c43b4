"""The fault suite, short: a real Redis and `tracker serve` under warriors while workers, the
server's parent and Redis are killed, Redis is stalled past the client timeout and filled to
maxmemory; then the census (benchmarks/chaos). `make chaos` runs the long version."""

import pytest

from chaos import Config, run

SHORT = Config(
    seed=7,
    items=2000,
    warriors=4,
    rounds=1,
    backfeed_batch=10_000,
    backfeed_posts=1,
    warmup_s=1.0,
    settle_s=2.0,
    stall_s=10.5,
    fill_hold_s=2.0,
    drain_timeout_s=60,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report():
    return run(SHORT)


def test_every_item_is_in_exactly_one_place(report):
    v = report["violations"]
    assert (v["missing"], v["in_two_places"], v["never_loaded"]) == ([], [], [])
    # The maximum backfeed batch (10,000, all but a fifth held by a limit) was taken whole.
    assert report["items_backfed_acknowledged"] >= SHORT.backfeed_batch * 9 // 10
    assert report["places"]["done"] == report["items_expected"]


def test_every_acknowledged_done_is_in_done(report):
    assert report["dones_acknowledged"] > 0
    assert report["violations"]["acked_done_not_in_done"] == []


def test_counters_equal_the_sets(report):
    assert report["violations"]["counters"] == {}


def test_no_claim_is_stranded_and_the_project_drains(report):
    assert report["violations"]["stranded_claims"] == []
    assert report["drain_s"] is not None


def test_no_item_is_handed_out_twice(report):
    assert report["items_handed_out"] > report["items_expected"] // 2
    # On a failure, when each fault came (at_s, as the violations say theirs) and what the
    # Redis kills were allowed to undo (chaos.ledger, LOSS_WINDOW_S).
    context = {"faults": report["faults"], "undone_by_redis_kill": report["undone_by_redis_kill"]}
    assert report["violations"]["handed_twice"] == [], context
    assert report["violations"]["handed_after_acked_done"] == [], context


def test_no_server_error_and_every_fault_recovered(report):
    assert report["violations"]["server_errors"] == {}
    assert report["violations"]["warrior_crashes"] == {}
    assert sorted(f["fault"] for f in report["faults"]) == sorted(SHORT.faults)
    assert all(f["recovery_s"] is not None and f["recovery_s"] < 15 for f in report["faults"])
    kill = next(f for f in report["faults"] if f["fault"] == "worker_kill")
    assert kill["replaced"]
    assert report["redis"]["restarts"] == 1


def test_workers_exit_when_their_parent_is_killed(report):
    # Before the fix (issue 12), the workers of a killed `tracker serve` kept serving and held
    # the port, so a restart failed with "address already in use".
    assert report["violations"]["orphaned_workers"] == []


def test_a_node_hours_off_served_calls_and_handed_out_no_claim_twice(report):
    skew = next(f for f in report["faults"] if f["fault"] == "clock_skew")
    assert skew["offset"] in ("+7h", "-7h")
    assert skew["calls_to_skewed_node"] > 10, skew
    assert report["violations"]["handed_twice"] == []
