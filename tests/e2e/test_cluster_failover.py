"""A Redis Cluster primary failing over under the tracker: three primaries, each with a replica.

The hot path's cluster connection (tracker_core.infra.cluster_redis) finds the slot's new owner
after its primary dies or hangs, answers 503 meanwhile and never sends a script again that may
have run; while a primary has a replica attached, each script is followed by WAIT, so the
replica that takes over holds every done a client was told OK. Each test starts its own cluster
(node timeout 2 s: a failover takes 3-5 s here) and checks the invariant on the survivor: every
item in exactly one place (benchmarks/chaos/census.py reads every place).
"""

from __future__ import annotations

import contextlib
import socket
import time

import pytest
import redis
from redis.crc import key_slot

from chaos import Config as ChaosConfig
from chaos import census
from chaos import run as run_chaos
from support.http_warrior import RetryingWarriors
from support.processes import start_live_server, stop_live_server
from support.redis_topologies import Cluster
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra import failover, topology
from tracker_core.infra.rawredis import OutcomeUnknown
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path):
    group = Cluster(tmp_path / "cluster", primaries=3, replicas=1).start()
    yield group
    group.stop()


def loaded(cluster, project: str, total: int) -> list[str]:
    names = [f"{project}-{i:04d}" for i in range(total)]
    admin = AdminContext.from_url(cluster.url)
    project_verbs.create(admin, project)
    item_verbs.add(admin, project, names)
    admin.conn.close()
    return names


def places(port: int, project: str) -> dict:
    """Place -> the set of items there, read from the node on PORT; asserts that each item is in
    one place only."""
    r = redis.Redis(port=port, decode_responses=True, encoding_errors="surrogateescape")
    found = census.places(r, project)
    twice = [item for item, n in census.where(found).items() if n > 1]
    assert not twice, f"{len(twice)} items in two places, e.g. {twice[:3]}"
    return {place: set(items) for place, items in found.items()}


def everywhere(found: dict) -> set[str]:
    return set().union(*found.values())


def test_a_primary_killed_under_live_load_loses_no_acknowledged_done(cluster):
    project, total = "failover", 600
    names = loaded(cluster, project, total)
    old = cluster.owner_port(ProjectKeys(project).tag)
    replica = cluster.replicas_of(old)
    server = start_live_server(cluster.url, workers=2)
    warriors = RetryingWarriors(server.port, project, threads=4, multi=5)
    try:
        warriors.start().wait_acknowledged(total // 4)
        new = cluster.crash_primary(old)
        killed_at = cluster.killed_at
        failed_over_s = time.monotonic() - killed_at
        with warriors.lock:
            at_crash = set(warriors.acknowledged)
        assert warriors.join(timeout_s=60), "the warriors did not finish after the failover"
    finally:
        warriors.stop()
        stop_live_server(server)

    # The replica took the project's slot, and the tracker followed it there.
    assert [new] == replica and cluster.owner_port(ProjectKeys(project).tag) == new
    found = places(new, project)
    # Every done a warrior was told OK is on the new primary: before and after the crash.
    assert at_crash and at_crash <= found["done"]
    assert warriors.acknowledged <= found["done"]
    # Every item is in exactly one place. The warriors stopped at 404, so nothing is queued; a
    # claim whose answer was lost in the crash stays out (reclaimed later), one batch a worker.
    assert everywhere(found) == set(names)
    assert everywhere(found) == found["done"] | found["out"]
    assert len(found["out"]) <= 5 * 2
    # The outage was visible as 503s only, and short.
    assert {status for _, status in warriors.errors} <= {503}
    served_again_s = min(answered for sent, answered in warriors.acked_at if sent > killed_at) - killed_at
    assert served_again_s < failed_over_s + 2
    print(
        f"\nfailover {failed_over_s:.2f} s (kill -9 to cluster_state ok); the first done sent after "
        f"the kill answered OK {served_again_s:.2f} s after it; {len(warriors.errors)} answers of 503"
    )


def cut_off(cluster, replica: int, primary: int) -> None:
    """Stop REPLICA from following PRIMARY once it holds all PRIMARY wrote: its link dropped and
    every resync refused (it authenticates as a user the primary does not know)."""
    r, p = redis.Redis(port=replica), redis.Redis(port=primary)
    deadline = time.monotonic() + 10
    while r.info("replication")["slave_repl_offset"] < p.info("replication")["master_repl_offset"]:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    r.config_set("masteruser", "nobody")
    r.config_set("masterauth", "none")
    p.client_kill_filter(_type="replica")
    while r.info("replication")["master_link_status"] != "down":
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_done_no_replica_acknowledged_is_answered_503_and_only_such_a_done_is_lost(cluster):
    project = "acks"
    names = loaded(cluster, project, 40)
    old = cluster.owner_port(ProjectKeys(project).tag)
    [replica] = cluster.replicas_of(old)
    waiting = Engine(cluster.url + "?wait_timeout_ms=300")  # the default: wait for 1 replica
    blind = Engine(cluster.url + "?wait_replicas=0")
    waits = redis.Redis(port=old).info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
    status, kept = waiting.claim(project, "alice", "127.0.0.1", 10)
    assert status == 200 and waiting.done(project, "alice", "", kept[:5], {"data": 5}, "null").new == 5
    status, unwaited = blind.claim(project, "bob", "127.0.0.1", 10)
    assert status == 200
    assert redis.Redis(port=old).info("commandstats")["cmdstat_wait"]["calls"] >= waits + 2

    cut_off(cluster, replica, old)
    # The primary still counts the replica it lost a moment ago: the done waits for it, and no
    # replica holds it within 300 ms: 503 for the client, which sends it again later.
    with pytest.raises(failover.NotAcknowledged):
        waiting.done(project, "alice", "", kept[5:], {"data": 5}, "null")
    # The same change made without waiting is acknowledged at once, by the primary alone.
    assert blind.done(project, "bob", "", unwaited, {"data": 10}, "null").new == 10

    assert cluster.crash_primary(old) == replica
    found = places(replica, project)
    assert everywhere(found) == set(names)
    # The done acknowledged after a replica held it survived the primary.
    assert set(kept[:5]) <= found["done"]
    # The control: the done acknowledged without waiting went with the primary (its items are
    # out again on the replica), as did the one answered 503, which its warrior will repeat.
    assert not (set(unwaited) | set(kept[5:])) & found["done"]
    assert set(unwaited) | set(kept[5:]) <= found["out"]

    # With no replica attached the new primary serves on its own (on its AOF) ...
    assert waiting.done(project, "alice", "", kept[5:], {"data": 5}, "null").new == 5
    # ... and once the old primary is back, as its replica, changes are waited for again:
    # the first call after REPLICA_CHECK_S reads ROLE, which names the replica, and the next
    # change is answered once the old primary holds it.
    cluster.restart(old)
    assert cluster.replicas_of(replica) == [old]
    time.sleep(failover.REPLICA_CHECK_S)
    assert waiting.claim(project, "carol", "127.0.0.1", 1)[0] == 200
    waits = redis.Redis(port=replica).info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
    assert waiting.done(project, "bob", "", unwaited, {"data": 10}, "null").new == 10
    assert redis.Redis(port=replica).info("commandstats")["cmdstat_wait"]["calls"] == waits + 1
    follower = redis.Redis(port=old, decode_responses=True)
    follower.execute_command("READONLY")  # a cluster replica answers reads of its own slots
    assert follower.smismember(ProjectKeys(project).done, unwaited) == [1] * len(unwaited)


def test_a_hung_primary_is_passed_over_once_its_replica_took_over(cluster):
    project = "hung"
    names = loaded(cluster, project, 30)
    old = cluster.owner_port(ProjectKeys(project).tag)
    [replica] = cluster.replicas_of(old)
    engine = Engine(cluster.url)
    status, first = engine.claim(project, "alice", "127.0.0.1", 5)
    assert status == 200
    conn = engine.conn._node(("127.0.0.1", old))
    conn.timeout_s = 1.0  # a claim sent to the hung node gives up after 1 s, not 10
    conn.close()  # (the timeout is set when connecting)
    try:
        # The primary stops answering but keeps its connections (a machine that hangs), and
        # the cluster gives its slots to the replica.
        new = cluster.hang_primary(old)
        # The engine's map still names the hung node: the claim is sent there and never
        # answered, so it is not sent again (503 for the client).
        with pytest.raises(OutcomeUnknown):
            engine.claim(project, "alice", "127.0.0.1", 5)
        # The next call reads the slot map again, from the other nodes first, and goes to the
        # replica that took over: no call waits on the hung node again.
        started = time.monotonic()
        status, second = engine.claim(project, "alice", "127.0.0.1", 5)
        took = time.monotonic() - started
        assert status == 200 and len(second) == 5 and took < 1.0
        assert engine.done(project, "alice", "", first + second, {"data": 10}, "null").new == 10
    finally:
        cluster.resume(old)
    assert new == replica
    assert cluster.owner_port(ProjectKeys(project).tag) == replica
    found = places(replica, project)
    assert everywhere(found) == set(names)
    assert set(first + second) <= found["done"]


@contextlib.contextmanager
def unanswered_port():
    """A loopback port whose SYNs go unanswered, as a host's that died: a listening socket with a
    full accept queue (the kernel then drops further SYNs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = [socket.socket() for _ in range(3)]
    try:
        for filler in fillers:
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        time.sleep(0.1)
        yield port
    finally:
        for sock in (*fillers, listener):
            sock.close()


def test_a_primary_whose_host_is_gone_is_given_up_after_seconds_not_a_call_timeout(cluster):
    project = "gone"
    loaded(cluster, project, 10)
    engine = Engine(cluster.url)
    assert engine.claim(project, "alice", "127.0.0.1", 1)[0] == 200
    slot = key_slot(ProjectKeys(project).tag.encode())
    with unanswered_port() as port:
        # The map names a primary whose host no longer answers (as before a failover).
        engine.conn._slots[slot] = ("127.0.0.1", port)
        started = time.monotonic()
        status, items = engine.claim(project, "alice", "127.0.0.1", 1)
        took = time.monotonic() - started
        # A process whose first seed node is that host pays for it when it first reads the map,
        # then asks it last.
        seeded = topology.connect(f"redis+cluster://127.0.0.1:{port}," + cluster.url.split("//", 1)[1])
        reads = []
        for _ in range(2):
            read_at = time.monotonic()
            seeded.refresh_slots()
            reads.append(time.monotonic() - read_at)
    # Two connects of PROBE_TIMEOUT_S each (nothing sent: safe to send elsewhere), then the
    # map read again and the claim run on the slot's owner; a call's 10 s timeout for each
    # connect would be 20 s, past FAILOVER_WAIT_S, and a 503.
    assert status == 200 and len(items) == 1
    assert 2 * failover.PROBE_TIMEOUT_S <= took < 2 * failover.PROBE_TIMEOUT_S + 1.5
    assert engine.conn._slots[slot] == ("127.0.0.1", cluster.owner_port(ProjectKeys(project).tag))
    assert reads[0] >= 2 * failover.PROBE_TIMEOUT_S and reads[1] < 0.5


def test_the_fault_suite_over_a_cluster_loses_nothing_in_a_failover():
    """`make chaos-cluster`, short, over a project of three shards (one a primary): warriors, a
    backfeeder and a prober through the real server while the first shard's primary is killed
    and its replica takes over; the census of every shard and the ledger then find every item
    once, every acknowledged done, nothing handed out twice."""
    cfg = ChaosConfig(
        cluster=True,
        shards=3,
        seed=5,
        items=1000,
        warriors=4,
        rounds=1,
        faults=("primary_failover",),
        backfeed_batch=2000,
        backfeed_posts=1,
        warmup_s=1.0,
        settle_s=2.0,
        drain_timeout_s=60,
    )
    report = run_chaos(cfg)
    assert report["passed"], {k: v for k, v in report["violations"].items() if v}
    [fault] = report["faults"]
    assert fault["new_primary"] != fault["old_primary"] and fault["recovery_s"] is not None
    assert report["redis"]["restarts"] == 1  # the old primary, back as a replica
    assert report["dones_acknowledged"] > 0 and report["places"]["done"] == report["items_expected"]
    print(f"\n{fault}")
