"""The named steps of a maintenance pass (tracker_core.maintainer.maintenance), one at a time.

Each step is run on its own against a real Redis and a segment directory, and checked by what it
moved and what it reported; the last tests check the order the loop runs them in and that a lost
lease ends the pass at the step that found it.
"""

import os
import time

import pytest

from support.projects import new_project
from tracker_core import scripts
from tracker_core.admin import census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.figures import stats
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance, steps
from tracker_core.offload import segment_file, segment_registry, staging
from tracker_core.offload.lease import Lease, LeaseLost

P = "steps"
K = ProjectKeys(P)


def url(n: int) -> str:
    return f"https://example.com/a b/{n}?q=%2F&x=ü#frag/" + "z" * 200


ITEMS = [url(n) for n in range(400)]


@pytest.fixture
def project(admin):
    return new_project(admin, P, ITEMS)


@pytest.fixture
def lease(r):
    held = Lease(r, K, "node-a")
    assert held.take()
    return held


def project_pass(r, directory, lease, **kw):
    """A pass over P as the maintainer would start it (settings read after taking the lease)."""
    return steps.ProjectPass(r, K, directory, lease, steps.Watermarks.read(r, K), **kw)


# -- recover_unfinished ------------------------------------------------------------------------


def test_recover_unfinished_puts_a_dead_maintainers_staged_items_back(project, r, tmp_path, lease):
    number, staged = scripts.offload_stage(
        r, K, holder=lease.holder, source="todo", source_key=K.todo, count=150
    )
    segment_file.write_segment(
        segment_file.segment_path(tmp_path, P, number), staged
    )  # written, never registered
    assert r.scard(K.todo) == 250
    p = project_pass(r, tmp_path, lease)
    maintenance.recover_unfinished(p)
    assert p.report["recovered"] == 150
    assert sorted(r.smembers(K.todo)) == sorted(ITEMS) and not r.exists(K.offloading)
    assert not segment_file.segment_path(tmp_path, P, number).exists()


def test_recover_unfinished_with_nothing_staged_reports_nothing(project, r, tmp_path, lease):
    p = project_pass(r, tmp_path, lease)
    maintenance.recover_unfinished(p)
    assert p.report == {"offloaded": 0, "refilled": 0}


# -- remove_stale_files ------------------------------------------------------------------------


def test_remove_stale_files_deletes_old_unregistered_files_on_a_cleanup_pass_only(
    project, admin, r, tmp_path, lease
):
    project_verbs.set_settings(
        admin, P, {"offload_high": "300", "offload_low": "100", "offload_segment_items": "100"}
    )
    assert staging.offload_one(r, K, tmp_path, 100, lease) == 100  # segment 1: registered
    stray = tmp_path / P / "7.zst"
    segment_file.write_segment(stray, ["https://example.com/left over?by=a crash#x"])
    old = time.time() - staging.STALE_FILE_S - 5
    for path in (stray, segment_file.segment_path(tmp_path, P, 1)):
        os.utime(path, (old, old))
    p = project_pass(r, tmp_path, lease)
    maintenance.remove_stale_files(p)
    assert stray.exists() and "files_removed" not in p.report
    p = project_pass(r, tmp_path, lease, cleanup=True)
    maintenance.remove_stale_files(p)
    assert p.report["files_removed"] == 1 and not stray.exists()
    assert segment_file.segment_path(tmp_path, P, 1).exists()  # registered: kept however old


# -- balance_queues ----------------------------------------------------------------------------


def test_balance_queues_offloads_each_queue_down_to_the_high_watermark(project, admin, r, tmp_path, lease):
    item_verbs.add(admin, P, [url(n) for n in range(1000, 1250)], queue="backfeed")
    project_verbs.set_settings(
        admin, P, {"offload_high": "100", "offload_low": "50", "offload_segment_items": "50"}
    )
    p = project_pass(r, tmp_path, lease)
    maintenance.balance_queues(p)
    assert p.report["offloaded"] == 300 + 150
    assert p.report["by_queue"] == {"todo": {"offloaded": 300}, "backfeed": {"offloaded": 150}}
    assert r.scard(K.todo) == 100 and r.scard(K.backfeed) == 100
    assert sorted(segment_registry.segment_sources(r, K).values()) == ["backfeed"] * 3 + ["todo"] * 6
    on_disk = {
        i
        for n in segment_registry.registry(r, K)
        for i in segment_file.read_segment(segment_file.segment_path(tmp_path, P, n))
    }
    assert on_disk | r.smembers(K.todo) | r.smembers(K.backfeed) == set(ITEMS) | {
        url(n) for n in range(1000, 1250)
    }
    assert len(on_disk) == 450


def test_balance_queues_refills_below_the_low_watermark_and_skips_an_unreadable_file(
    project, admin, r, tmp_path, lease
):
    project_verbs.set_settings(
        admin, P, {"offload_high": "150", "offload_low": "50", "offload_segment_items": "100"}
    )
    maintenance.balance_queues(project_pass(r, tmp_path, lease))
    assert segment_registry.registry(r, K) == {1: 100, 2: 100, 3: 50}
    segment_file.segment_path(tmp_path, P, 1).write_bytes(b"not zstd")
    r.delete(K.todo)  # claimed away
    project_verbs.set_settings(admin, P, {"offload_high": "300", "offload_low": "150"})
    p = project_pass(r, tmp_path, lease)
    maintenance.balance_queues(p)
    # Segment 1 cannot be read: left registered (still counted) and reported; 2 and 3 came back.
    assert p.report == {"offloaded": 0, "refilled": 150, "unreadable_segments": [1]}
    assert r.scard(K.todo) == 150 and sorted(segment_registry.registry(r, K)) == [1]


def test_balance_queues_with_offloading_off_refills_every_queue_segment(project, admin, r, tmp_path, lease):
    project_verbs.set_settings(
        admin, P, {"offload_high": "50", "offload_low": "25", "offload_segment_items": "25"}
    )
    maintenance.balance_queues(project_pass(r, tmp_path, lease))
    project_verbs.set_settings(admin, P, {"offload_high": "0"})
    p = project_pass(r, tmp_path, lease)
    maintenance.balance_queues(p)
    assert p.report == {"offloaded": 0, "refilled": 350}
    assert sorted(r.smembers(K.todo)) == sorted(ITEMS) and segment_registry.registry(r, K) == {}


# -- offload_done ------------------------------------------------------------------------------


def finish(engine, count):
    """Claim COUNT items as alice and report them done in one call (one log entry)."""
    status, claimed = engine.claim(P, "alice", "10.0.0.1", count)
    assert status == 200 and len(claimed) == count
    assert engine.done(P, "alice", "1.2", claimed, ["example.com", 100], '{"n": 1}').new == count


def test_offload_done_moves_done_beyond_its_watermark_only_with_done_mode_offload(
    project, admin, engine, r, tmp_path, lease
):
    finish(engine, 300)
    project_verbs.set_settings(admin, P, {"done_offload_high": "100", "offload_segment_items": "150"})
    p = project_pass(r, tmp_path, lease)
    maintenance.offload_done(p)  # done_mode=keep: done stays
    assert r.scard(K.done) == 300 and "done_offloaded" not in p.report
    project_verbs.set_settings(admin, P, {"done_mode": "offload"})
    p = project_pass(r, tmp_path, lease)
    maintenance.offload_done(p)
    assert p.report["done_offloaded"] == 200 and r.scard(K.done) == 100
    assert set(segment_registry.segment_sources(r, K).values()) == {"done"}
    assert (
        census_verbs.status(admin, P)["done_offloaded"] == 200
        and census_verbs.status(admin, P)["offloaded"] == 0
    )


# -- archive_done_log ---------------------------------------------------------------------------


def test_archive_done_log_archives_entries_beyond_log_maxlen(project, admin, engine, r, tmp_path, lease):
    project_verbs.set_settings(admin, P, {"log_maxlen": "10"})
    for _ in range(25):
        finish(engine, 1)
    assert r.xlen(K.log) == 25
    p = project_pass(r, tmp_path, lease)
    maintenance.archive_done_log(p)
    assert p.report["log_archived"] == 15 and r.xlen(K.log) == 10
    assert list((tmp_path / P / "log").iterdir())  # its segment files


def test_archive_done_log_cleans_its_stale_files_on_a_cleanup_pass(project, admin, r, tmp_path, lease):
    stray = tmp_path / P / "log" / "99.jsonl.zst"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left by a crash")
    old = time.time() - staging.STALE_FILE_S - 5
    os.utime(stray, (old, old))
    p = project_pass(r, tmp_path, lease)
    maintenance.archive_done_log(p)
    assert stray.exists() and p.report == {"offloaded": 0, "refilled": 0}
    p = project_pass(r, tmp_path, lease, cleanup=True)
    maintenance.archive_done_log(p)
    assert p.report["log_files_removed"] == 1 and not stray.exists()


# -- reclassify_changed -------------------------------------------------------------------------


def test_reclassify_changed_holds_matching_items_once_per_settings_age(project, admin, r, tmp_path, lease):
    ages: dict = {}
    p = project_pass(r, tmp_path, lease, classified_ages=ages)
    maintenance.reclassify_changed(p)
    assert p.report["held"] == 0 and P in ages
    limit_verbs.add(admin, P, "low", r"regex:/a b/1[0-9]\?", "1/s", reclassify=False)
    p = project_pass(r, tmp_path, lease)  # reclassification off: nothing moves
    maintenance.reclassify_changed(p)
    assert "held" not in p.report and r.zcard(K.limited) == 0
    p = project_pass(r, tmp_path, lease, classified_ages=ages)
    maintenance.reclassify_changed(p)
    assert p.report["held"] == 10 and r.zcard(K.limited) == 10 and r.scard(K.todo) == 390
    p = project_pass(r, tmp_path, lease, classified_ages=ages)
    maintenance.reclassify_changed(p)  # the settings age did not move since
    assert "held" not in p.report


# -- upkeep_stats -------------------------------------------------------------------------------


def test_upkeep_stats_rolls_up_at_most_every_stats_every_s(project, r, tmp_path, lease):
    now_ms = int(time.time() * 1000)
    hour = now_ms // stats.HOUR_MS - 10  # ten hours ago, nobody looked since
    r.hset(K.minute(hour * 60 + 5), mapping={"items_done": 7, "requests": 9})
    maintenance.upkeep_stats(project_pass(r, tmp_path, lease))  # upkeep off
    assert not r.exists(K.hour(hour))
    stats_at: dict = {}
    maintenance.upkeep_stats(project_pass(r, tmp_path, lease, stats_at=stats_at, now=1000.0))
    assert r.hgetall(K.hour(hour)) == {"minutes": "1", "items_done": "7", "requests": "9"}
    assert r.hget(K.minute(now_ms // stats.MINUTE_MS), "backlog") == "400"
    assert stats_at == {P: 1000.0}
    r.hset(K.minute(hour * 60 + 6), "items_done", 3)
    r.delete(K.hour(hour))
    maintenance.upkeep_stats(project_pass(r, tmp_path, lease, stats_at=stats_at, now=1059.0))
    assert not r.exists(K.hour(hour)) and stats_at == {P: 1000.0}  # too soon
    maintenance.upkeep_stats(project_pass(r, tmp_path, lease, stats_at=stats_at, now=1060.0))
    assert r.hget(K.hour(hour), "items_done") == "10" and stats_at == {P: 1060.0}


# -- the pass: steps in order, a lost lease ends it ---------------------------------------------


def test_the_steps_run_in_their_documented_order():
    assert [s.__name__ for s in steps.STEPS] == [
        "recover_unfinished",
        "remove_stale_files",
        "balance_queues",
        "offload_done",
        "archive_done_log",
        "reclassify_changed",
        "upkeep_stats",
    ]
    assert steps.OFFLOAD_STEPS == steps.STEPS[:5]


def test_a_lost_lease_ends_the_pass_at_the_step_that_found_it(project, r, tmp_path, lease):
    ran = []

    def first(p):
        ran.append("first")
        p.add("offloaded", 5)

    def loses(p):
        ran.append("loses")
        raise LeaseLost("node-b took it")

    def never(p):
        ran.append("never")

    report = maintenance.run_steps(project_pass(r, tmp_path, lease), (first, loses, never))
    assert ran == ["first", "loses"]
    assert report == {"offloaded": 5, "refilled": 0, "lease_lost": True}


class LosesLeaseAfterOneSegment(Lease):
    """The lease goes to another maintainer once the first segment is committed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.keeps = 0

    def keep(self):
        self.keeps += 1
        if self.keeps == 3:  # before staging the second segment
            raise LeaseLost("node-b took it")


def test_what_moved_before_a_lost_lease_still_counts(project, admin, r, tmp_path):
    r.delete(K.todo)  # claimed away: only the secondary queue is long
    item_verbs.add(admin, P, [url(n) for n in range(1000, 1300)], queue="secondary")
    project_verbs.set_settings(
        admin, P, {"offload_high": "150", "offload_low": "50", "offload_segment_items": "100"}
    )
    lease = LosesLeaseAfterOneSegment(r, K, "node-a")
    assert lease.take()
    report = maintenance.run_steps(project_pass(r, tmp_path, lease), steps.OFFLOAD_STEPS)
    assert report == {
        "offloaded": 100,
        "refilled": 0,
        "by_queue": {"secondary": {"offloaded": 100}},
        "lease_lost": True,
    }
    assert segment_registry.registry(r, K) == {1: 100} and r.scard(K.secondary) == 200
