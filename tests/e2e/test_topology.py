"""The data layer beyond one Redis: a real three-primary Redis Cluster and a real Sentinel group.

The hot path's raw hiredis connection routes each project to the node owning its hash slot and
follows MOVED/ASK; under Sentinel it finds the new primary after a failover, and a state change is
answered only once a replica holds it, so a crash of the primary loses no acknowledged done.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from falcon import testing

from support.http_warrior import RetryingWarriors
from support.locust_runs import seeded_run
from support.processes import start_live_server, stop_live_server
from support.projects import new_project
from support.redis_topologies import Cluster, SentinelGroup
from support.seesaw_runner import finish_warrior, start_warrior
from tracker_api.app import create_app
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra import topology
from tracker_core.infra.embedded import free_port
from tracker_core.infra.rawredis import ConnectionLost, OutcomeUnknown, RawRedis
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

pytestmark = pytest.mark.slow


# -- URL forms (no server needed) ---------------------------------------------------------------


def test_topology_urls_parse_into_their_parts():
    spec = topology.parse_topology_url(
        "redis+sentinel://:s%40cret@10.0.0.1:26379,10.0.0.2:26380/tracker/2?wait_replicas=0"
    )
    assert spec == {
        "kind": "sentinel",
        "password": "s@cret",
        "sentinels": [("10.0.0.1", 26379), ("10.0.0.2", 26380)],
        "service": "tracker",
        "db": 2,
        "wait_replicas": 0,
        "wait_timeout_ms": 2000,
    }
    assert topology.parse_topology_url("redis+cluster://a:7000,b:7001")["nodes"] == [("a", 7000), ("b", 7001)]
    assert topology.parse_topology_url("redis://h:1/0") == {"kind": "single", "url": "redis://h:1/0"}


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://h:1",
        "redis+sentinel://h:1/svc/x",
        "redis+cluster://h:1/3",
        "redis+cluster://h",
        "redis+cluster://h:x",
    ],
)
def test_malformed_topology_urls_are_refused(url):
    with pytest.raises(ValueError):
        topology.parse_topology_url(url)


# -- A connection that breaks: resent only when Redis cannot have seen the commands ------------

# Counts its runs in KEYS[1], then keeps Redis busy for ARGV[1] ms: longer than a short client
# timeout, so the client gives up after its commands left, while Redis runs them to the end.
SLOW_INCR = """
redis.call('INCR', KEYS[1])
local t0 = redis.call('TIME')
repeat
  local t = redis.call('TIME')
until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= tonumber(ARGV[1]) * 1000
return 1
"""


def _short_timeout(conn: RawRedis, seconds: float) -> RawRedis:
    conn.timeout_s = seconds
    conn.close()  # the timeout is set when connecting
    return conn


def test_a_script_whose_answer_times_out_is_not_sent_again(redis_url, r):
    conn = _short_timeout(RawRedis(redis_url), 0.2)
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("EVAL", SLOW_INCR, 1, "runs", 600)
    time.sleep(1.0)  # a resent copy would have queued behind the first and run by now
    assert r.get("runs") == "1"
    assert conn.execute_command("INCR", "runs") == 2  # the connection is reopened afterwards


def test_a_connection_redis_closed_while_idle_is_reopened_before_sending(redis_url, r):
    conn = RawRedis(redis_url)
    assert conn.execute_command("CLIENT", "SETNAME", "victim") == "OK"
    assert r.client_kill_filter(_type="normal", skipme=True) >= 1
    time.sleep(0.1)
    assert conn.execute_command("INCR", "runs") == 1
    assert conn.execute_command("CLIENT", "GETNAME") is None  # a new connection
    assert r.get("runs") == "1"


def test_an_unreachable_redis_is_connection_lost_without_the_password():
    conn = RawRedis(f"redis://:s3cret@127.0.0.1:{free_port()}/0")
    with pytest.raises(ConnectionLost) as caught:
        conn.execute_command("PING")
    assert "s3cret" not in str(caught.value)


def test_an_answer_lost_after_the_claim_was_sent_is_a_503(redis_url, admin, clock):
    project_verbs.create(admin, "slowclaim")
    item_verbs.add(admin, "slowclaim", [f"s{i}" for i in range(10)])
    engine = Engine(redis_url, clock=clock)
    client = testing.TestClient(create_app(engine))
    body = {"downloader": "alice", "api_version": "2"}
    assert client.simulate_post("/slowclaim/request", json=body).status_code == 200
    _short_timeout(engine.conn, 0.3)
    busy = threading.Thread(target=redis.Redis.from_url(redis_url).eval, args=(SLOW_INCR, 1, "x", 900))
    busy.start()
    # Redis answers nobody while a script runs: a PING that times out means the slow one started.
    probe = redis.Redis.from_url(redis_url, socket_timeout=0.05)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            probe.ping()
        except redis.exceptions.TimeoutError:
            break
        time.sleep(0.005)
    try:
        answer = client.simulate_post("/slowclaim/request", json=body)
    finally:
        busy.join()
    assert answer.status_code == 503 and "retry" in answer.text
    # The claim ran once when Redis got to it (its answer was lost: the item is out, and is
    # reclaimed like any claim whose warrior vanished); the next request is served normally.
    assert client.simulate_post("/slowclaim/request", json=body).status_code == 200
    assert census_verbs.status(admin, "slowclaim")["out"] == 3


# -- Redis Cluster -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    group = Cluster(tmp_path_factory.mktemp("cluster")).start()
    yield group
    group.stop()


@pytest.fixture
def cluster_url(cluster):
    for node in cluster.nodes:
        redis.Redis(port=node.port).flushall()
    return cluster.url


def projects_on_every_node(cluster, count_per_node=1) -> list[str]:
    """Project names whose hash slots fall on each of the cluster's primaries."""
    wanted = {node.port: count_per_node for node in cluster.nodes}
    names, i = [], 0
    while any(wanted.values()):
        name = f"proj{i}"
        owner = cluster.owner_port(f"{{{name}}}")
        if wanted[owner]:
            wanted[owner] -= 1
            names.append(name)
        i += 1
    return names


def test_projects_spread_over_the_cluster_complete_with_the_real_client(cluster, cluster_url, tmp_path):
    projects = projects_on_every_node(cluster)
    admin = AdminContext.from_url(cluster_url)
    for project in projects:
        project_verbs.create(admin, project)
        assert item_verbs.add(admin, project, [f"{project}-{i}" for i in range(12)])["added"] == 12
    server = start_live_server(cluster_url)
    try:
        warriors = [
            start_warrior(server, tmp_path, project=project, claims=4, multi=3, concurrent=2)
            for project in projects
        ]
        results = [finish_warrior(w)[0] for w in warriors]
    finally:
        stop_live_server(server)
    for project, result in zip(projects, results):
        assert sorted(result["names"]) == sorted(f"{project}-{i}" for i in range(12))
        status = census_verbs.status(admin, project)
        assert (status["todo_total"], status["out"], status["done"]) == (0, 0, 12)
        # The project's keys live on the node that owns its slot, and only there.
        k = ProjectKeys(project)
        owner = cluster.owner_port(k.tag)
        for node in cluster.nodes:
            held = redis.Redis(port=node.port).execute_command(
                "CLUSTER", "COUNTKEYSINSLOT", _slot_of(project, node.port)
            )
            assert (held > 0) == (node.port == owner)


def test_maintain_drops_the_reclaim_index_of_projects_on_every_node(cluster, cluster_url):
    # Each project's keys live in a slot of their own, on the node that owns it: the one UNLINK
    # is split by slot (the admin's redis-py cluster client), and every node's key goes.
    from tracker_core.admin import upgrades

    projects = projects_on_every_node(cluster)
    admin = AdminContext.from_url(cluster_url)
    for project in projects:
        project_verbs.create(admin, project)
        redis.Redis(port=cluster.owner_port(ProjectKeys(project).tag)).zadd(
            ProjectKeys(project).reclaim_at, {"x": 1}
        )
    assert upgrades.drop_reclaim_index(admin) == {"dropped": len(projects)}
    for project in projects:
        assert not redis.Redis(port=cluster.owner_port(ProjectKeys(project).tag)).exists(
            ProjectKeys(project).reclaim_at
        )
    # The settings of a project an older tracker created (a listpack) are padded where they live.
    old = redis.Redis(port=cluster.owner_port(ProjectKeys(projects[-1]).tag), decode_responses=True)
    old.delete(ProjectKeys(projects[-1]).settings)
    old.hset(ProjectKeys(projects[-1]).settings, mapping={"settings_age": "2", "created_ms": "1"})
    assert upgrades.pad_hashes(admin) == {"padded": 1}
    assert old.object("encoding", ProjectKeys(projects[-1]).settings) == "hashtable"
    assert old.hget(ProjectKeys(projects[-1]).settings, "settings_age") == "2"


def _slot_of(project: str, port: int) -> int:
    return redis.Redis(port=port).cluster("keyslot", ProjectKeys(project).tag)


def start_migration(project: str, source_port: int, target_port: int) -> None:
    """Move PROJECT's keys from SOURCE to TARGET as `redis-cli --cluster reshard` does, but leave
    the slot owned by SOURCE (MIGRATING/IMPORTING): SOURCE then answers ASK for them."""
    source, target = redis.Redis(port=source_port), redis.Redis(port=target_port)
    slot = _slot_of(project, source_port)
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.cluster("myid"))
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.cluster("myid"))
    keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys)


def finish_migration(cluster, project: str, target_port: int) -> None:
    """Give the slot to TARGET on every node: SOURCE then answers MOVED."""
    target_id = redis.Redis(port=target_port).cluster("myid")
    for node in cluster.nodes:
        redis.Redis(port=node.port).execute_command(
            "CLUSTER", "SETSLOT", _slot_of(project, node.port), "NODE", target_id
        )


def test_engine_follows_ask_during_a_migration_and_moved_after_it(cluster, cluster_url, clock):
    project = projects_on_every_node(cluster)[0]
    new_project(AdminContext.from_url(cluster_url), project, [f"x{i}" for i in range(10)])
    engine = Engine(cluster_url, clock=clock)
    status, items = engine.claim(project, "alice", "127.0.0.1", 2)  # learns the slot map
    assert status == 200 and len(items) == 2
    source = cluster.owner_port(ProjectKeys(project).tag)
    target = next(n.port for n in cluster.nodes if n.port != source)

    start_migration(project, source, target)
    # Mid-migration the source answers ASK, and the target TRYAGAIN for a script whose keys
    # are not all there yet: the engine keeps retrying until the reshard completes.
    finisher = threading.Timer(0.5, finish_migration, (cluster, project, target))
    finisher.start()
    status, more = engine.claim(project, "alice", "127.0.0.1", 3)
    finisher.join()
    assert status == 200 and len(more) == 3
    assert redis.Redis(port=target).zcard(ProjectKeys(project).out) == 5

    # Another engine whose map still says SOURCE gets MOVED, follows it and remembers.
    engine = Engine(cluster_url, clock=clock)
    engine.conn.refresh_slots()
    engine.conn._slots[_slot_of(project, source)] = ("127.0.0.1", source)
    assert engine.done(project, "alice", "", items + more, {"data": 5}, "null").new == 5
    assert engine.conn._slots[_slot_of(project, target)] == ("127.0.0.1", target)
    assert redis.Redis(port=target).scard(ProjectKeys(project).done) == 5
    assert (
        redis.Redis(port=source).execute_command("CLUSTER", "COUNTKEYSINSLOT", _slot_of(project, source)) == 0
    )


def _migrate_keys(source_port: int, target_port: int, keys: list) -> None:
    redis.Redis(port=source_port).execute_command(
        "MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys
    )


def test_a_pipeline_follows_ask_command_by_command_during_a_migration(cluster, cluster_url, clock):
    project = projects_on_every_node(cluster)[1]
    new_project(AdminContext.from_url(cluster_url), project, [f"m{i}" for i in range(20)])
    engine = Engine(cluster_url, clock=clock)
    status, items = engine.claim(project, "alice", "127.0.0.1", 6)
    assert status == 200 and engine.done(project, "alice", "", items[:4], {"data": 4}, "null").new == 4
    before = engine.counts(project)  # an 11-command pipeline over the project's keys
    assert (before["queues"]["todo"], before["out"], before["done_kept"]) == (14, 2, 4)
    source = cluster.owner_port(ProjectKeys(project).tag)
    target = next(n.port for n in cluster.nodes if n.port != source)
    slot = _slot_of(project, source)
    source_r, target_r = redis.Redis(port=source), redis.Redis(port=target)
    target_r.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_r.cluster("myid"))
    source_r.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_r.cluster("myid"))
    keys = sorted(source_r.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000))
    assert len(keys) >= 4
    # Half the keys moved: the source answers for the others and ASKs for these; each asked
    # command is resent to the target after its own ASKING, and only those.
    _migrate_keys(source, target, keys[::2])
    started = time.monotonic()
    assert engine.counts(project) == before
    # Every key moved, the slot still the source's: every command is asked.
    _migrate_keys(source, target, keys[1::2])
    assert engine.counts(project) == before
    assert time.monotonic() - started < 2
    # The slot handed over: the source answers MOVED and the engine follows it.
    finish_migration(cluster, project, target)
    assert engine.counts(project) == before
    assert engine.done(project, "alice", "", items[4:], {"data": 2}, "null").new == 2
    assert redis.Redis(port=target).scard(ProjectKeys(project).done) == 6


def test_a_cluster_script_whose_answer_times_out_is_not_sent_again(cluster, cluster_url):
    conn = topology.connect(cluster_url)
    key = "{runs}:count"
    assert conn.execute_command("SET", key, 0) == "OK"
    owner = ("127.0.0.1", cluster.owner_port(key))
    _short_timeout(conn._node(owner), 0.2)
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("EVAL", SLOW_INCR, 1, key, 600)
    time.sleep(1.0)
    assert redis.Redis(port=owner[1]).get(key) == b"1"
    assert conn.execute_command("INCR", key) == 2


def test_locust_warriors_complete_projects_spread_over_the_cluster(cluster, cluster_url, tmp_path):
    """Locust warriors (one headless run per project, all at once) through a tracker whose
    projects live on different primaries: every item done, IRSR and error thresholds met."""
    projects = projects_on_every_node(cluster)
    seeded = 300
    server = start_live_server(cluster_url, workers=2)
    try:

        def run(project):
            return seeded_run(
                server,
                project,
                seeded,
                tmp_path / project,
                users=4,
                spawn_rate=4,
                run_time_s=12,
                download_time="uniform:0.005,0.02",
                retry_delay_s=0.2,
            )

        with ThreadPoolExecutor(len(projects)) as pool:
            results = list(pool.map(run, projects))
    finally:
        stop_live_server(server)
    admin = AdminContext.from_url(cluster_url)
    for project, result in zip(projects, results):
        summary, counts = result["summary"], result["summary"]["counts"]
        assert result["exit_code"] == 0 and result["passed"], (result["failures"], result["log"])
        assert summary["irsr"] >= 0.99
        assert counts["server_5xx"] == 0 and counts["transport_errors"] == 0
        assert counts["done_not_ok"] == 0
        assert counts["items_done"] == seeded and result["accounting"]["ok"]
        status = census_verbs.status(admin, project)
        assert (status["todo_total"], status["out"], status["done"]) == (0, 0, seeded)
        # Each project was served by the primary owning its slot.
        owner = cluster.owner_port(ProjectKeys(project).tag)
        assert redis.Redis(port=owner).scard(ProjectKeys(project).done) == seeded


# -- Sentinel ----------------------------------------------------------------------------------


@pytest.fixture
def sentinel_group(tmp_path):
    group = SentinelGroup(tmp_path / "sentinel").start()
    yield group
    group.stop()


def test_the_first_script_after_discovery_waits_for_a_replica(sentinel_group):
    conn = topology.connect(sentinel_group.url())
    primary = redis.Redis(port=sentinel_group.primary.port)

    def waits() -> int:
        return primary.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)

    assert conn.execute_command("EVAL", "return redis.call('INCR', KEYS[1])", 1, "n") == 1
    assert waits() == 1  # the very first script, before any ROLE check of its own
    assert redis.Redis(port=sentinel_group.replica.port).get("n") == b"1"
    # An answer lost after the script was sent is not resent, and the primary is asked for anew.
    _short_timeout(conn._primary, 0.2)
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("EVAL", SLOW_INCR, 1, "runs", 600)
    assert conn._primary is None
    time.sleep(1.0)
    assert primary.get("runs") == b"1"
    assert conn.execute_command("EVAL", "return redis.call('INCR', KEYS[1])", 1, "runs") == 2
    assert waits() == 3


def test_a_primary_crash_during_load_loses_no_acknowledged_done(sentinel_group):
    url = sentinel_group.url()
    project, total = "failover", 600
    admin = AdminContext.from_url(url)
    project_verbs.create(admin, project)
    item_verbs.add(admin, project, [f"f{i:04d}" for i in range(total)])
    server = start_live_server(url, workers=2)
    warriors = RetryingWarriors(server.port, project, threads=4, multi=5)
    try:
        warriors.start().wait_acknowledged(total // 4)
        old_primary = sentinel_group.primary.port
        sentinel_group.crash_primary()
        with warriors.lock:
            at_crash = set(warriors.acknowledged)
        assert warriors.join(timeout_s=90)
    finally:
        warriors.stop()
        stop_live_server(server)
    acknowledged, threads = warriors.acknowledged, warriors.threads
    errors = [status for _, status in warriors.errors]

    assert sentinel_group.current_primary_port() == sentinel_group.replica.port != old_primary
    survivor = redis.Redis(port=sentinel_group.replica.port, decode_responses=True)
    k = ProjectKeys(project)
    done = survivor.smembers(k.done)
    # Every done the warriors were told OK is on the new primary: before and after the crash.
    assert at_crash <= done
    assert acknowledged <= done
    # And the invariant holds on the survivor: each item in exactly one place. The warriors
    # stopped at 404, so nothing is queued; a claim whose answer was lost in the crash stays
    # out (reclaiming brings those back), at most one batch per worker.
    queued = survivor.smembers(k.todo)
    out = set(survivor.zrange(k.out, 0, -1))
    assert not queued
    assert not (out & done)
    assert len(out | done) == total
    assert len(out) <= 5 * len(threads)
    # The outage was short and visible as 503s, never as a wrong answer.
    assert set(errors) <= {503}
