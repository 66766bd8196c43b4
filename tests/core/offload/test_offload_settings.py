"""No setting strands items (issue 27): offload settings that could leave items on disk are
refused as a whole and atomically; a project stored with them by an older tracker is refilled
with safe stand-ins and flagged (show, status, maintain's report and log line)."""

from __future__ import annotations

import itertools

import pytest
import redis

from support.offload_settings import SOUND, WIDE
from support.projects import new_project
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, Conflict
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance, steps
from tracker_core.offload import segment_registry
from tracker_core.project import settings_schema

P = "rules"
K = ProjectKeys(P)


@pytest.fixture
def project(admin):
    return new_project(admin, P)


def sound(high: int, low: int, per_segment: int) -> bool:
    """What the rules promise, stated on its own: every segment comes back (a queue below LOW is
    refilled) and a refilled segment stays (it cannot take a queue below LOW past HIGH)."""
    return high == 0 or (1 <= low < high and per_segment >= 1 and low - 1 + per_segment <= high)


def test_the_rules_accept_only_sound_combinations_and_keep_one_item_of_margin():
    for high, low, per_segment in itertools.product(range(7), range(8), range(1, 9)):
        values = {
            "offload_high": str(high),
            "offload_low": str(low),
            "offload_segment_items": str(per_segment),
        }
        problem = settings_schema.offload_rules(values).problem
        if problem is None:
            assert sound(high, low, per_segment), values
        elif sound(high, low, per_segment):
            # The one sound case refused: a segment of exactly high - low + 1, which would fill
            # the queue to the high watermark itself (the rule is "segment <= high - low").
            assert per_segment == high - low + 1, (values, problem)


@pytest.mark.parametrize(
    "stored",
    [
        {"offload_high": "2000"},  # the measured case: 3,000 of 5,000 items stayed on disk
        {"offload_high": "2000", "offload_low": "2000", "offload_segment_items": "1000"},
        {"offload_high": "2000", "offload_low": "5000", "offload_segment_items": "1000"},
        {"offload_high": "2000", "offload_low": "1500", "offload_segment_items": "1000"},
        {"offload_high": "2000", "offload_low": "1000"},  # the default 50,000 a segment
        {"offload_high": "1", "offload_low": "0", "offload_segment_items": "1"},
        {"offload_high": "2000", "offload_low": "lots", "offload_segment_items": "1000"},
    ],
)
def test_stored_bad_settings_get_sound_stand_ins_that_keep_the_memory_bound(stored):
    used = settings_schema.offload_rules(stored)
    assert used.problem is not None
    assert sound(used.high, used.low, used.per_segment) and used.per_segment <= used.high - used.low
    assert used.high == max(int(stored["offload_high"]), 2)
    # The stand-ins pass the rules themselves: maintenance moves items as a sound project's would.
    again = {"offload_high": str(used.high), "offload_low": str(used.low)}
    assert (
        settings_schema.offload_rules({**again, "offload_segment_items": str(used.per_segment)}).problem
        is None
    )


def test_sound_settings_are_used_as_they_are(admin, project, r):
    project_verbs.set_settings(admin, P, WIDE)
    assert steps.Watermarks.read(r, K) == steps.Watermarks(3000, 1000, 1000, "keep", 100_000, None)
    # A 0 segment size stored by an older tracker always meant the default; it still does.
    r.hset(K.settings, mapping={"offload_high": "0", "offload_segment_items": "0"})
    assert steps.Watermarks.read(r, K).per_segment == settings_schema.OFFLOAD_SEGMENT_DEFAULT


def test_a_bad_project_cannot_be_created_and_a_sound_one_can(admin, r):
    with pytest.raises(BadInput, match="offload_high=2000 without offload_low"):
        project_verbs.create(admin, P, {"offload_high": "2000"})
    assert not r.exists(K.settings) and not r.sismember("tracker:projects", P)
    project_verbs.create(admin, P, SOUND)
    assert {n: r.hget(K.settings, n) for n in SOUND} == SOUND


def test_a_project_stored_with_bad_settings_may_change_others_and_fix_them_only_whole(admin, project, r):
    r.hset(K.settings, mapping={"offload_high": "2000", "offload_low": "0"})
    assert project_verbs.show(admin, P)["offload_warning"].startswith("offload_high=2000 without offload_low")
    project_verbs.set_settings(admin, P, {"title": "Still refilled"})  # touches no offload setting
    assert r.hget(K.settings, "title") == "Still refilled"
    before = r.hgetall(K.settings)
    # offload_low alone leaves the default 50,000-item segment past the gap: refused.
    with pytest.raises(BadInput, match="offload_segment_items=50000 is more than"):
        project_verbs.set_settings(admin, P, {"offload_low": "1000"})
    assert r.hgetall(K.settings) == before
    project_verbs.set_settings(admin, P, {"offload_low": "1000", "offload_segment_items": "1000"})
    assert project_verbs.show(admin, P)["offload_warning"] is None
    assert census_verbs.status(admin, P)["offload_warning"] is None


class RacedRedis(redis.Redis):
    """A connection whose first read of the offload settings is followed at once by another
    admin's change (RACE), as if it landed between this change's check and its write."""

    race: dict = {}

    def hmget(self, name, keys, *args):
        found = super().hmget(name, keys, *args)
        if self.race:
            race, self.race = self.race, {}
            project_verbs.set_settings(
                AdminContext(redis.Redis(connection_pool=self.connection_pool)), P, race
            )
        return found


def test_a_change_that_races_another_is_checked_again_with_it(admin, project, r, redis_url):
    project_verbs.set_settings(
        admin, P, {"offload_high": "2000", "offload_low": "1000", "offload_segment_items": "500"}
    )
    raced = RacedRedis.from_url(redis_url, decode_responses=True)
    # Each change is sound alone; together (low 1400, segment 900) a segment overflows the gap.
    raced.race = {"offload_segment_items": "900"}
    with pytest.raises(
        BadInput, match="offload_segment_items=900 is more than offload_high - offload_low = 600"
    ):
        project_verbs.set_settings(AdminContext(raced), P, {"offload_low": "1400"})
    assert (
        r.hget(K.settings, "offload_low") == "1000" and r.hget(K.settings, "offload_segment_items") == "900"
    )
    assert project_verbs.show(admin, P)["offload_warning"] is None
    # Raced by a change that leaves the whole sound, it is written on the next try.
    project_verbs.set_settings(admin, P, {"offload_segment_items": "500"})
    raced.race = {"offload_segment_items": "600"}
    project_verbs.set_settings(AdminContext(raced), P, {"offload_low": "1400"})
    assert (
        r.hget(K.settings, "offload_low") == "1400" and r.hget(K.settings, "offload_segment_items") == "600"
    )


def test_a_change_raced_on_every_try_gives_up_with_a_conflict(admin, project, r, redis_url):
    class AlwaysRaced(redis.Redis):
        def hmget(self, name, keys, *args):
            found = super().hmget(name, keys, *args)
            if "offload_low" in keys:  # the offload check's read (not the shard layout's)
                self.hincrby(K.settings, "offload_low", 1)  # another admin, every time
            return found

    project_verbs.set_settings(admin, P, WIDE)
    with pytest.raises(Conflict, match="kept changing"):
        project_verbs.set_settings(
            AdminContext(AlwaysRaced.from_url(redis_url, decode_responses=True)), P, {"offload_high": "2500"}
        )
    assert r.hget(K.settings, "offload_high") == "3000"
    assert int(r.hget(K.settings, "offload_low")) == 1000 + project_verbs.OFFLOAD_CHECK_TRIES


def test_maintenance_refills_a_stranded_queue_and_reports_and_logs_it_once(admin, project, r, tmp_path):
    item_verbs.add(admin, P, [f"https://example.com/a b/{n}?q=%2F#x" for n in range(500)])
    # As an older tracker accepted them: the offload_high alone.
    r.hset(K.settings, mapping={"offload_high": "200", "offload_segment_items": "100"})
    lines: list[str] = []
    maintainer = maintenance.Maintainer(r, tmp_path, "node-a", stats_upkeep=False, log=lines.append)
    first = maintainer.pass_once()
    maintainer.log_report(first)
    assert first[P]["offloaded"] == 300 and r.scard(K.todo) == 200
    assert first[P]["offload_warning"]["used"] == {
        "offload_high": 200,
        "offload_low": 100,
        "offload_segment_items": 100,
    }
    refilled = 0
    for _ in range(4):
        r.delete(K.todo)  # drained by warriors: with the settings as stored, nothing came back
        report = maintainer.pass_once()
        maintainer.log_report(report)
        refilled += report[P]["refilled"]
    assert refilled == 300 and segment_registry.registry(r, K) == {}
    assert len(lines) == 1 and lines[0].startswith(f"{P}: offload_high=200 without offload_low")
    assert "refilling meanwhile with offload_high=200 offload_low=100 offload_segment_items=100" in lines[0]
    # Fixed, then broken again (written past the checks): logged again, once.
    project_verbs.set_settings(admin, P, {"offload_low": "100"})
    maintainer.log_report(maintainer.pass_once())
    r.hdel(K.settings, "offload_low")
    maintainer.log_report(maintainer.pass_once())
    maintainer.log_report(maintainer.pass_once())
    assert len(lines) == 2
    maintainer.release()
