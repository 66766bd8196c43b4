"""A sharded project's figures, logs and maintainer pass on a Redis Cluster of three primaries
(docs/sharding.md): every read that spans the shards is one call or pipeline per shard, each in
its own slot, so none is refused with CROSSSLOT."""

from __future__ import annotations

import io

import pytest
from falcon import testing

from support.redis_topologies import Cluster
from tracker_api.app import create_app
from tracker_api.public.live import LiveFeed, ProjectWatcher
from tracker_core.admin import item_verbs, log_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.figures import stats
from tracker_core.figures.stats import StatsReader
from tracker_core.items.engine import Engine
from tracker_core.maintainer.maintenance import Maintainer

P = "bigsite"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    group = Cluster(tmp_path_factory.mktemp("cluster"), primaries=3).start()
    yield group
    group.stop()


def test_statistics_logs_and_the_pass_over_three_primaries(cluster, clock, tmp_path):
    admin = AdminContext.from_url(cluster.url)
    offload = {"offload_high": "8", "offload_low": "4", "offload_segment_items": "4"}
    project_verbs.create(admin, P, {"log_maxlen": "1", "rate_limit": "6000", **offload}, shards=3)
    layout = admin.layout(P)
    assert len({cluster.owner_port(k.tag) for k in layout.keys}) == 3
    item_verbs.add(admin, P, [f"https://example.org/c/{i}?q=a%20b" for i in range(60)])
    engine = Engine(cluster.url, clock=clock)
    watcher = ProjectWatcher(LiveFeed(cluster.url), P)
    watcher._start()
    done = 0
    for n, who in enumerate(("alice", "bob", "carol") * 3):
        code, names = engine.claim(P, who, f"10.0.0.{n % 3}", 2)
        assert code == 200
        clock.advance(1)
        done += engine.done(P, who, "1", names, ["example.org", 10], "{}").new
    reader = StatsReader(engine.conn, engine.layout)
    snap = reader.snapshot(P, engine.counts(P), int(clock.now * 1000))
    assert sum(snap["charts"]["minute"]["items_done"]) == done == 18
    assert snap["uniques"]["downloaders_day"] == 3 and reader.downloader_total(P) == 3
    assert sum(len(line["items"]) for line in reader.recent_log(P, 50)) == done
    assert reader.downloader_chart(P, "bob", int(clock.now * 1000))["items"] == 6
    assert sum(len(line["items"]) for line in watcher._step(100)[0]) == done
    web = testing.TestClient(create_app(engine))
    assert web.simulate_get("/metrics").status_code == 200
    assert web.simulate_get(f"/{P}/stats.json").json["downloaders_total"] == 3
    stats.upkeep(admin.conn, P, int(clock.now * 1000))
    maintainer = Maintainer(admin.conn, tmp_path)
    report = maintainer.pass_once()[P]
    assert "error" not in report and report["log_archived"] == 9 - 3 and report["offloaded"] > 0
    left = []
    for _ in range(100):  # the rest, each shard refilled from its own files as it runs low
        left += engine.claim(P, "dave", "10.0.0.9", 4)[1]
        maintainer.refill_now(P)
    assert len(left) == 60 - done and engine.counts(P)["queues"]["offloaded"] == 0
    out = io.BytesIO()
    log_verbs.export(admin, P, tmp_path, out)
    assert len(out.getvalue().splitlines()) == 9
    watcher.engine.conn.close()
    engine.conn.close()
