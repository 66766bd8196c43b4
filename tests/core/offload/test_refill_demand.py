"""Refill on demand (issue 27): a claim that finds a watched queue under its refill target asks
once (claim-21.lua), and the maintainer refills at once (offload.demand), under its lease, up to a
target that follows the drain it measures, never past what offload_high leaves room for."""

import threading
import time

import pytest
import redis

from support.projects import new_project
from tracker_core import keyspace, scripts
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import demand, segment_file, segment_registry, staging
from tracker_core.offload.lease import Lease
from tracker_core.scripts.constants import REFILL_WATCH_FIELD

P = "ondemand"
K = ProjectKeys(P)
ITEMS = [f"item-{i:05d}" for i in range(1000)]
SMALL = {"offload_high": "200", "offload_low": "100", "offload_segment_items": "100"}


@pytest.fixture
def project(admin):
    return new_project(admin, P, ITEMS)


@pytest.fixture
def asks(r):
    """The settings keys published on the refill channel, as a list that fills as they come."""
    pubsub = r.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(keyspace.REFILL_CHANNEL)
    seen: list[str] = []

    def read(wait_s: float = 0.2) -> list[str]:
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            message = pubsub.get_message(timeout=left)
            if message is not None:
                seen.append(message["data"])
        return seen

    yield read
    pubsub.close()


def after_a_pass(admin, r, tmp_path, **options) -> maintenance.Maintainer:
    """P at the SMALL watermarks after a pass of node-a's maintainer (800 items in 8 segment files);
    that maintainer, holding P's lease."""
    project_verbs.set_settings(admin, P, SMALL)
    maintainer = maintenance.Maintainer(r, tmp_path, "node-a", **options)
    maintainer.pass_once()
    return maintainer


def each_once(r, directory, items=ITEMS, handed_out=()):
    """Every item is in exactly one place: a queue, out, done, or a registered segment's file."""
    found = list(handed_out)
    for queue in K.shared_queues():
        found += r.smembers(queue)
    for number in segment_registry.registry(r, K):
        found += segment_file.read_segment(segment_file.segment_path(directory, P, number))
    assert sorted(found) == sorted(items)


# -- the claim's side ----------------------------------------------------------------------------


def test_a_claim_under_the_watch_asks_once_and_says_which_project(project, r, engine, asks):
    r.hset(K.settings, REFILL_WATCH_FIELD, str(990 * 16 + 1))  # todo: ask under 990
    assert engine.claim(P, "alice", "10.0.0.1", 5)[0] == 200  # 1000 waiting: no ask
    assert r.hget(K.settings, REFILL_WATCH_FIELD) == "15841" and asks() == []
    assert engine.claim(P, "alice", "10.0.0.1", 5)[0] == 200  # 995: no ask
    assert engine.claim(P, "alice", "10.0.0.1", 5)[0] == 200  # 990: no ask
    assert asks() == []
    status, items = engine.claim(P, "alice", "10.0.0.1", 5)  # 985 < 990: asks, and is served
    assert status == 200 and len(items) == 5
    assert not r.hexists(K.settings, REFILL_WATCH_FIELD)
    assert asks() == [K.settings] and keyspace.project_of_settings(K.settings) == P
    assert engine.claim(P, "alice", "10.0.0.1", 5)[0] == 200
    assert asks() == [K.settings], "one ask per watch written"
    assert r.scard(K.todo) == 975 and r.zcard(K.out) == 25


def test_an_empty_watched_queue_asks_and_the_claim_is_still_a_404(admin, r, engine, asks):
    project_verbs.create(admin, P)
    r.hset(K.settings, REFILL_WATCH_FIELD, str(1 * 16 + 1))
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 404
    assert asks() == [K.settings] and not r.hexists(K.settings, REFILL_WATCH_FIELD)


def test_only_the_watched_queues_count(project, r, engine, asks):
    # Segments of backfeed wait (bit 2); todo is low but has none on disk: nothing to ask for.
    r.sadd(K.backfeed, *[f"b-{i}" for i in range(500)])
    r.hset(K.settings, REFILL_WATCH_FIELD, str(100 * 16 + 2))
    r.srem(K.todo, *ITEMS[:950])
    assert engine.claim(P, "alice", "10.0.0.1", 10)[0] == 200
    assert asks() == [] and r.hget(K.settings, REFILL_WATCH_FIELD) == "1602"
    r.hset(K.settings, REFILL_WATCH_FIELD, str(100 * 16 + 2 + 1))  # both: todo (40 left) is under
    assert engine.claim(P, "alice", "10.0.0.1", 10)[0] == 200
    assert asks() == [K.settings]


def test_a_watch_the_claim_cannot_read_asks_and_goes(project, r, engine, asks):
    r.hset(K.settings, REFILL_WATCH_FIELD, "soon please")
    assert engine.claim(P, "alice", "10.0.0.1", 1)[0] == 200
    assert asks() == [K.settings] and not r.hexists(K.settings, REFILL_WATCH_FIELD)


def test_a_watched_queue_of_the_wrong_type_fails_the_claim_before_anything_moves(project, r, engine):
    r.delete(K.backfeed)
    r.set(K.backfeed, "not a set")
    r.hset(K.settings, REFILL_WATCH_FIELD, str(100 * 16 + 1 + 2))
    with pytest.raises((scripts.ScriptError, redis.ResponseError)):
        engine.claim(P, "alice", "10.0.0.1", 10)
    assert r.scard(K.todo) == len(ITEMS) and r.zcard(K.out) == 0 and not r.exists(K.claims)
    assert r.hget(K.settings, REFILL_WATCH_FIELD) == "1603"


# -- the targets ---------------------------------------------------------------------------------


def test_the_drain_meter_counts_what_claims_took_not_what_the_maintainer_moved():
    meter = demand.DrainMeter()
    meter.observe(0.0, 10_000)
    for second in range(1, 11):  # claims take 1,000 a second; the maintainer adds 5,000 once
        if second == 5:
            meter.moved(5_000)
            size = 10_000 - 1_000 * second + 5_000
        else:
            size = 10_000 - 1_000 * second + (5_000 if second > 5 else 0)
        rate = meter.observe(float(second), size)
    assert 900 < rate <= 1_000
    assert meter.observe(11.0, size + 50_000) < rate, "a queue that grows is not draining"


def test_the_target_reads_ahead_by_the_drain_but_leaves_room_under_high():
    clock = [0.0]
    plan = demand.RefillDemand(clock=lambda: clock[0])
    marks = dict(high=100_000, low=10_000, per_segment=20_000)
    assert plan.target(P, "todo", 50_000, **marks) == 10_000  # no drain seen yet: low
    for _ in range(20):  # 20,000 items a second
        clock[0] += 0.5
        size = plan.meters[(P, "todo")].size - 10_000
        target = plan.target(P, "todo", size, **marks)
    assert target == pytest.approx(demand.READ_AHEAD_S * 20_000, rel=0.05)
    for _ in range(20):  # 100,000 a second: READ_AHEAD_S of it would not leave a segment's room
        clock[0] += 0.1
        target = plan.target(P, "todo", plan.meters[(P, "todo")].size - 10_000, **marks)
    assert target == 100_000 - 20_000
    # low above high - segment (settings an older tracker stored): low wins, as before
    assert plan.target(P, "redo", 0, high=1_000, low=900, per_segment=500) == 900


# -- the maintainer's side -----------------------------------------------------------------------


def drained_to(engine, r, size):
    """Claim from todo until SIZE items are left; the names handed out."""
    got = []
    while r.scard(K.todo) > size:
        got += engine.claim(P, "alice", "10.0.0.1", min(100, r.scard(K.todo) - size))[1]
    return got


def test_a_pass_writes_the_watch_while_segments_wait_and_clears_it_after(project, admin, r, engine, tmp_path):
    project_verbs.set_settings(admin, P, SMALL)
    maintainer = maintenance.Maintainer(r, tmp_path, "node-a")
    assert maintainer.pass_once()[P]["offloaded"] == 800
    assert r.hget(K.settings, REFILL_WATCH_FIELD) == str(100 * 16 + 1)  # todo's wait; low: no drain
    # Turned off: every segment comes back in the pass, and nothing is left to ask for.
    project_verbs.set_settings(admin, P, {"offload_high": "0", "offload_low": "0"})
    assert maintainer.pass_once()[P]["refilled"] == 800
    assert not r.hexists(K.settings, REFILL_WATCH_FIELD)
    maintainer.release()


def test_the_watch_leaves_out_a_queue_whose_files_cannot_be_read(project, admin, r, tmp_path):
    maintainer = after_a_pass(admin, r, tmp_path, log=lambda line: None)
    r.srem(K.todo, *r.smembers(K.todo))
    for path in (tmp_path / P).iterdir():
        path.write_bytes(b"not zstandard")
    report = maintainer.pass_once()[P]
    assert len(report["unreadable_segments"]) == 8
    # Claims would ask on every call for segments no refill can bring back.
    assert not r.hexists(K.settings, REFILL_WATCH_FIELD)
    maintainer.release()


def test_refill_now_brings_segments_back_and_watches_again(project, admin, r, engine, tmp_path, asks):
    maintainer = after_a_pass(admin, r, tmp_path)
    handed_out = drained_to(engine, r, 90)
    # Each claim looks before it takes: the one that left 90 saw 100, not under 100.
    assert asks() == [] and r.hexists(K.settings, REFILL_WATCH_FIELD)
    handed_out += engine.claim(P, "alice", "10.0.0.1", 1)[1]
    assert asks() == [K.settings] and not r.hexists(K.settings, REFILL_WATCH_FIELD)
    report = maintainer.refill_now(P)
    assert report["refilled"] == 100 and r.scard(K.todo) == 189  # one segment: 100 + 89 <= high
    assert int(r.hget(K.settings, REFILL_WATCH_FIELD)) % 16 == demand.QUEUE_BITS["todo"] == 1
    each_once(r, tmp_path, handed_out=handed_out)
    maintainer.release()


def test_refill_now_without_the_lease_changes_nothing(project, admin, r, engine, tmp_path):
    holder = after_a_pass(admin, r, tmp_path)
    handed_out = drained_to(engine, r, 50)
    files = sorted(p.name for p in (tmp_path / P).iterdir())
    other = maintenance.Maintainer(r, tmp_path, "node-b")
    assert other.refill_now(P) is None
    assert r.scard(K.todo) == 50 and sorted(p.name for p in (tmp_path / P).iterdir()) == files
    each_once(r, tmp_path, handed_out=handed_out)
    holder.release()


def test_the_running_maintainer_refills_when_claims_ask_not_at_its_next_pass(
    project, admin, r, engine, tmp_path
):
    # A pass an hour apart: only the ask can bring the segments back while this test runs.
    project_verbs.set_settings(admin, P, SMALL)
    maintainer = maintenance.Maintainer(r, tmp_path, "node-a")
    stop = threading.Event()
    runner = threading.Thread(target=maintainer.run, args=(3600.0, stop))
    runner.start()
    try:
        assert offload_settled(r)
        handed_out, empty = [], 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and len(handed_out) < len(ITEMS):
            status, items = engine.claim(P, "alice", "10.0.0.1", 20)
            handed_out += items
            if status == 404:
                empty += 1
                time.sleep(0.001)
        assert sorted(handed_out) == ITEMS, "every item handed out once, within the pass interval"
        assert empty <= 50, f"{empty} empty answers while items waited on disk"
        assert int(r.hget(K.stats, "items_refilled")) == 800
    finally:
        stop.set()
        runner.join(timeout=15)
    assert not runner.is_alive()


def offload_settled(r, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if r.scard(K.todo) <= 200 and r.hexists(K.settings, REFILL_WATCH_FIELD):
            return True
        time.sleep(0.01)
    return False


def test_the_pass_and_the_refiller_never_overfill_nor_lose_an_item(project, admin, r, engine, tmp_path):
    maintainer = after_a_pass(admin, r, tmp_path, log=lambda line: None)
    handed_out, sizes, errors = [], [], []
    done = threading.Event()

    def refill_hard():
        try:
            while not done.is_set():
                maintainer.refill_now(P)
                sizes.append(r.scard(K.todo))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=refill_hard) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        while len(handed_out) < len(ITEMS):
            handed_out += engine.claim(P, "alice", "10.0.0.1", 7)[1]
            if len(handed_out) % 70 == 0:
                maintainer.pass_once()
    finally:
        done.set()
        for worker in workers:
            worker.join()
    assert not errors
    assert sorted(handed_out) == ITEMS
    assert max(sizes) <= 200, "two refills of one queue at once would pass offload_high"
    assert "unreadable_segments" not in maintainer.pass_once()[P]
    maintainer.release()


@pytest.fixture
def offloaded(project, admin, r, tmp_path):
    """P at SMALL, offloaded by a maintainer holding the lease returned: 200 in todo, 8 segments."""
    project_verbs.set_settings(admin, P, SMALL)
    lease = Lease(r, K, "node-a")
    assert lease.take()
    maintenance.maintain_project(r, P, tmp_path, lease=lease)
    return lease


def test_a_registry_read_before_a_refill_elsewhere_still_refills_each_segment_once(offloaded, r, tmp_path):
    # The refiller reads the registry once and hands it to refill_one for each segment: one
    # that went meanwhile (refilled by another caller, exported) is neither refilled twice nor
    # taken for unreadable because its file is gone.
    lease = offloaded
    sources = segment_registry.segment_sources(r, K)
    oldest, second = sorted(sources)[:2]
    assert staging.refill_one(r, K, tmp_path, lease) == 100  # the oldest, behind the reader's back
    skip: set = set()
    assert staging.refill_one(r, K, tmp_path, lease, skip=skip, sources=sources) == 100
    assert oldest not in sources and second not in sources and skip == set()
    assert sources == segment_registry.segment_sources(r, K)
    each_once(r, tmp_path)
    # Unregistered with its file still there (as an export leaves it): the refill script says
    # so, and the registry is read again.
    third, fourth = sorted(sources)[:2]
    r.hdel(K.segments, third)
    assert staging.refill_one(r, K, tmp_path, lease, skip=skip, sources=sources) == 100
    assert third not in sources and fourth not in sources and skip == set()
    assert sources == segment_registry.segment_sources(r, K)


def test_the_refiller_subscribes_again_after_a_redis_restart(tmp_path):
    # Passes an hour apart: only a refiller that subscribed again, and took the lease again
    # (the restarted Redis no longer has it), can answer the asks after it.
    server = EmbeddedRedis(tmp_path / "redis", port=free_port())
    server.start()
    stop = threading.Event()
    runner = None
    try:
        admin = AdminContext.from_url(server.url)
        r = admin.conn
        project_verbs.create(admin, P, SMALL)
        item_verbs.add(admin, P, ITEMS)
        lines: list[str] = []
        maintainer = maintenance.Maintainer(r, tmp_path / "segments", "node-a", log=lines.append)
        runner = threading.Thread(target=maintainer.run, args=(3600.0, stop), daemon=True)
        runner.start()
        assert offload_settled(r)
        server.stop()
        deadline = time.monotonic() + 10
        while not any(line.startswith("refill channel:") for line in lines):
            assert time.monotonic() < deadline, "the lost subscription is logged"
            time.sleep(0.05)
        server.start()
        engine = Engine(server.url)
        handed_out: list = []
        deadline = time.monotonic() + 30
        while len(handed_out) < len(ITEMS) and time.monotonic() < deadline:
            status, items = engine.claim(P, "alice", "10.0.0.1", 20)
            handed_out += items
            if status == 404:
                time.sleep(0.01)
        assert sorted(handed_out) == ITEMS
        assert runner.is_alive()
    finally:
        stop.set()
        if runner is not None:
            runner.join(15)
        server.stop()


def test_refill_now_takes_a_lease_gone_since_its_last_renewal(project, admin, r, engine, tmp_path):
    # Renewed a second ago, then gone (a Redis restarted without it): nobody else holds it.
    maintainer = after_a_pass(admin, r, tmp_path)
    handed_out = drained_to(engine, r, 50)
    r.delete(K.maintain_lease)
    assert maintainer.refill_now(P)["refilled"] == 100
    assert r.get(K.maintain_lease) == "node-a" and r.scard(K.todo) == 150
    # Held by another maintainer meanwhile: nothing moves.
    r.set(K.maintain_lease, "node-b")
    handed_out += drained_to(engine, r, 50)
    assert maintainer.refill_now(P) == {"offloaded": 0, "refilled": 0, "lease_lost": True}
    assert r.scard(K.todo) == 50
    each_once(r, tmp_path, handed_out=handed_out)


def test_refill_one_reads_a_registry_without_segments_again_and_refills_below_a_size_only(
    offloaded, r, tmp_path
):
    lease = offloaded
    oldest = min(segment_registry.registry(r, K))
    # The caller's registry was read before these segments were written: read again.
    sources: dict = {}
    assert staging.refill_one(r, K, tmp_path, lease, sources=sources) == 100
    assert oldest not in sources and sources == segment_registry.segment_sources(r, K)
    # The queue holds 300 now: a refill up to 300 moves nothing, and reads no registry again.
    before = dict(sources)
    assert staging.refill_one(r, K, tmp_path, lease, sources=sources, below=300) == staging.ENOUGH
    assert sources == before and r.scard(K.todo) == 300
    assert staging.refill_one(r, K, tmp_path, lease, sources=sources, below=301) == 100
    each_once(r, tmp_path)
