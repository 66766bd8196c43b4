"""One project over three Redis Cluster primaries (docs/sharding.md), driven by real seesaw-kit
warriors: the documented maxima (multi=1000 claims after a 10,000-entry backfeed post) and a
primary failing over mid-run.

Each shard's tag is chosen so that the three shards land on three different primaries; the
invariant (every item in exactly one place) is checked over all shards, each read from the node
that owns it.
"""

from __future__ import annotations

import time
import urllib.request

import pytest
import redis

from chaos import census
from support.processes import start_live_server, stop_live_server
from support.redis_topologies import Cluster
from support.seesaw_runner import finish_warrior, run_warrior, start_warrior
from tracker_core.admin import backfeed_verbs, census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext

pytestmark = pytest.mark.slow

P = "bigsite"


def url_names(prefix: str, n: int) -> list[str]:
    return [f"https://{prefix}.example.com/a b/{i}?x=%2F{i}&y=#{i}" for i in range(n)]


def every_place(cluster: Cluster, admin: AdminContext) -> dict[str, set]:
    """Place -> items, over every shard read on its own primary; asserts no item is in two."""
    found: dict[str, set] = {}
    seen: dict[str, str] = {}
    for k in admin.layout(P).keys:
        node = redis.Redis(
            port=cluster.owner_port(k.tag), decode_responses=True, encoding_errors="surrogateescape"
        )
        for place, counter in census.places(node, P, k=k).items():
            for item, n in counter.items():
                assert n == 1 and item not in seen, f"{item!r} in {place} and {seen.get(item)}"
                seen[item] = place
                found.setdefault(place, set()).add(item)
    return found


@pytest.fixture
def cluster(tmp_path):
    group = Cluster(tmp_path / "cluster", primaries=3, replicas=1).start()
    yield group
    group.stop()


def test_the_shards_land_on_three_primaries_and_seesaw_completes_them(cluster, tmp_path):
    admin = AdminContext.from_url(cluster.url)
    project_verbs.create(admin, P, shards=3)
    shown = project_verbs.show(admin, P)["shards"]
    nodes = [s["node"] for s in shown]
    assert len(set(nodes)) == 3
    assert {int(n.rsplit(":", 1)[1]) for n in nodes} == cluster.primary_ports()
    names = url_names("seesaw", 60)
    assert item_verbs.add(admin, P, names)["added"] == 60
    server = start_live_server(cluster.url)
    try:
        warriors = [
            start_warrior(
                server, tmp_path, project=P, claims=10, multi=3, concurrent=2, downloader=f"shardy{i}"
            )
            for i in range(2)
        ]
        results = [finish_warrior(w)[0] for w in warriors]
    finally:
        stop_live_server(server)
    assert sorted(n for result in results for n in result["names"]) == sorted(names)
    status = census_verbs.status(admin, P)
    assert (status["todo_total"], status["out"], status["done"]) == (0, 0, 60)
    assert every_place(cluster, admin)["done"] == set(names)


def test_the_documented_maxima_over_the_shards(cluster, tmp_path):
    admin = AdminContext.from_url(cluster.url)
    project_verbs.create(admin, P, {"max_multi": "1000"}, shards=3)
    secret = backfeed_verbs.create_secret(admin, P)["secret"]
    posted = url_names("backfeed", 10_000)
    server = start_live_server(cluster.url)
    try:
        # A grab script's backfeed: one newline-delimited POST (docs/protocol.md); seesaw-kit has
        # no backfeed task of its own.
        body = "\n".join(posted).encode() + b"\n"
        request = urllib.request.Request(
            f"{server.base}/backfeed/legacy/{P}-{secret}?delimiter=%0A", data=body, method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.status == 200
        per_shard = [len(census.places(_node(cluster, k), P, k=k)["backfeed"]) for k in admin.layout(P).keys]
        assert sum(per_shard) == 10_000 and min(per_shard) > 3000, per_shard
        # Ten seesaw claims of multi=1000: each gathers from every shard once one runs short.
        result, _ = run_warrior(server, tmp_path, 10, project=P, multi=1000, downloader="maxi")
    finally:
        stop_live_server(server)
    assert result["claims"] == 10 and not result["failed"]
    assert sorted(result["names"]) == sorted(posted)
    status = census_verbs.status(admin, P)
    assert (status["out"], status["done"]) == (0, 10_000)
    assert every_place(cluster, admin)["done"] == set(posted)


def _node(cluster: Cluster, k) -> redis.Redis:
    return redis.Redis(
        port=cluster.owner_port(k.tag), decode_responses=True, encoding_errors="surrogateescape"
    )


def test_a_primary_fails_over_mid_run_and_every_item_is_accounted_for(cluster, tmp_path):
    admin = AdminContext.from_url(cluster.url)
    project_verbs.create(admin, P, shards=3)
    names = url_names("failover", 600)
    item_verbs.add(admin, P, names)
    server = start_live_server(cluster.url)
    try:
        # Two seesaw warriors (retrying every answer but a 200, 0.3 s apart) make 100 claims of 5
        # between them: fewer than the 600 items, so claims lost in the failover (their items out
        # until reclaimed) never leave a warrior waiting on a 404.
        warriors = [
            start_warrior(server, tmp_path, 50, project=P, multi=5, concurrent=2, downloader=f"fail{i}")
            for i in range(2)
        ]
        deadline = time.monotonic() + 60
        while census_verbs.status(admin, P)["done"] < 150:
            assert time.monotonic() < deadline, "the warriors did not get going"
            time.sleep(0.05)
        victim = cluster.owner_port(admin.layout(P).keys[1].tag)
        cluster.crash_primary(victim)
        results = [finish_warrior(w, timeout_s=180) for w in warriors]
    finally:
        stop_live_server(server)
    acknowledged = [name for result, _ in results for name in result["names"]]
    assert len(acknowledged) == 500 == len(set(acknowledged))  # 100 claims of 5, each done once
    admin = AdminContext.from_url(cluster.url)  # the slot map after the failover
    found = every_place(cluster, admin)
    assert set().union(*found.values()) == set(names)  # none lost, none twice (every_place)
    assert set(acknowledged) <= found["done"]  # every done a warrior was told OK survived
    # A claim whose answer was lost in the failover (503) stays out until it is reclaimed.
    assert len(found.get("out", set())) <= 2 * 2 * 5 * 3
