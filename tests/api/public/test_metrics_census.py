"""/metrics reads the one census: its queue gauges and to-do total are census.read's figures."""

from prometheus_client.parser import text_string_to_metric_families

from tracker_api.app import create_app
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.figures import census
from tracker_core.keyspace import ProjectKeys

P = "census-proj"
K = ProjectKeys(P)


def gauges(text: str) -> tuple[dict[str, float], float]:
    queues, total = {}, None
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("project") != P:
                continue
            if s.name == "tracker_queue_items":
                queues[s.labels["queue"]] = s.value
            elif s.name == "tracker_todo_items":
                total = s.value
    return queues, total


def test_metrics_queue_gauges_are_the_census(admin, r, engine):
    from falcon import testing

    project_verbs.create(admin, P)
    urls = [f"https://example.com/p a/{i}?q=%2F{i}#x" for i in range(40)]
    item_verbs.add(admin, P, urls[:20])
    item_verbs.add(admin, P, urls[20:30], queue="secondary")
    item_verbs.add(admin, P, urls[30:35], queue="downloader:bob")
    limit_verbs.add(admin, P, "slow", "prefix:https://example.com/p a/3", "1/m")[
        "settings_age"
    ]  # holds some back
    item_verbs.add(admin, P, urls[35:])
    engine.claim(P, "alice", "10.0.0.1", 3)
    expected = census.read(census.redis_py_runner(r), K)
    queues, total = gauges(testing.TestClient(create_app(engine)).simulate_get("/metrics").text)
    assert queues == {q: float(n) for q, n in expected.items()}
    assert total == sum(expected.values())
    assert expected["downloader"] == 5 and expected["secondary"] == 10 and expected["limited"] > 0
