"""tracker_core.notify.events: when each event fires and when it re-arms (pure functions)."""

from __future__ import annotations

from tracker_core.notify import events
from tracker_core.notify.events import ProjectSeen, Thresholds

TH = Thresholds(backlog_growth=100, backlog_window_s=60, stall_s=10, clock_off_s=1.0, drained_cooldown_s=30)


def seen(queued=0, out=0, done=0, paused=False, stalled=(), stuck=()):
    return ProjectSeen(queued, out, done, paused, tuple(stalled), tuple(stuck))


def run(sequence, state=None):
    """Feed (now_s, ProjectSeen) pairs; the events' names, as (now_s, name)."""
    fired = []
    for now_s, observed in sequence:
        state, found = events.project(state, observed, int(now_s * 1000), TH)
        fired += [(now_s, name) for name, _ in found]
    return fired, state


def test_first_sight_fires_nothing():
    assert run([(0, seen(paused=True))])[0] == []
    assert run([(0, seen(queued=0, done=5))])[0] == []  # already drained when first seen


def test_drained_fires_on_the_way_to_empty_once_then_waits_its_cooldown():
    busy, empty = seen(queued=3, out=1, done=1), seen(done=4)
    fired, _ = run([(0, busy), (1, empty), (2, empty), (3, busy), (4, empty), (35, busy), (36, empty)])
    # The drain at 4 s comes within 30 s of the one at 1 s: not sent; the one at 36 s is.
    assert fired == [(1, "project.drained"), (36, "project.drained")]


def test_drained_is_seen_even_when_the_items_came_and_went_between_two_checks():
    fired, _ = run([(0, seen(done=0)), (1, seen(done=2))])
    assert fired == [(1, "project.drained")]


def test_paused_and_resumed_each_fire_once():
    fired, _ = run([(0, seen(queued=1)), (1, seen(queued=1, paused=True)), (2, seen(queued=1, paused=True))]
                   + [(3, seen(queued=1))])  # fmt: skip
    assert fired == [(1, "project.paused"), (3, "project.resumed")]


def test_backlog_growing_at_its_threshold_not_below_and_re_armed_by_a_quiet_window():
    fired, _ = run([(0, seen(queued=1000)), (10, seen(queued=1099))])
    assert fired == []  # 99 more: one short
    steps = [(0, seen(queued=1000)), (10, seen(queued=900)), (20, seen(queued=1000)),  # 100 over the low
             (30, seen(queued=1500)), (61, seen(queued=1600)),  # still growing: quiet
             (90, seen(queued=1650)), (122, seen(queued=1660)),  # a window with <100 growth re-arms
             (130, seen(queued=1760))]  # fmt: skip
    fired, _ = run(steps)
    assert fired == [(20, "backlog.growing"), (130, "backlog.growing")]


def test_stalled_and_stuck_fire_after_lasting_their_time_and_re_arm_when_cleared():
    steps = [(0, seen(queued=5, stalled=["todo"])), (9.9, seen(queued=5, stalled=["todo"])),
             (10, seen(queued=5, stalled=["todo"], stuck=["offloading"])),
             (15, seen(queued=5, stalled=["todo"], stuck=["offloading"])),
             (16, seen(queued=5)), (17, seen(queued=5, stalled=["todo"])), (27, seen(queued=5, stalled=["todo"])),
             (30, seen(queued=5, stuck=["offloading"]))]  # fmt: skip
    fired, _ = run(steps)
    assert fired == [(10, "refill.stalled"), (27, "refill.stalled")]
    fired, _ = run(steps + [(40, seen(queued=5, stuck=["offloading"]))])
    assert fired[-1] == (40, "offload.stuck")


def test_clock_off_fires_past_its_threshold_and_re_arms_below_half():
    state, fired = None, []
    for offset in (0.2, 1.0, 1.01, 3.0, 0.6, 1.5, 0.49, -1.2):
        state, found = events.clock(state, offset, "node1", TH)
        fired += [(offset, name) for name, _ in found]
    assert fired == [(1.01, "clock.off"), (-1.2, "clock.off")]


def test_failover_fires_when_the_primaries_change():
    state, found = events.failover(None, ["127.0.0.1:7000"])
    assert found == []
    state, found = events.failover(state, ["127.0.0.1:7000"])
    assert found == []
    state, found = events.failover(state, ["127.0.0.1:7001"])
    assert found == [("redis.failover", {"before": ["127.0.0.1:7000"], "after": ["127.0.0.1:7001"]})]
