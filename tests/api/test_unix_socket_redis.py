"""A local Redis on a Unix socket (unix://, what `tracker run` starts) serves the whole app: the
hot path's RawRedis and the admin paths' redis-py client alike."""

import pytest
from falcon import testing

from tracker_api.app import create_app
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.items.engine import Engine

NAME = "https://example.com/a b//c?q=%20#x"


@pytest.fixture
def unix_url(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis").start()  # no port: the socket only
    yield server.url
    server.stop()


def test_claim_done_and_stats_over_a_unix_socket(unix_url):
    assert unix_url.startswith("unix://")
    admin = AdminContext.from_url(unix_url)
    project_verbs.create(admin, "sock")
    item_verbs.add(admin, "sock", [NAME])
    web = testing.TestClient(create_app(Engine(unix_url), admin=admin))
    claimed = web.simulate_post("/sock/request", json={"downloader": "alice", "api_version": "2"})
    assert claimed.status_code == 200 and claimed.json["item_name"] == NAME
    done = web.simulate_post("/sock/done", json={"downloader": "alice", "item": NAME, "bytes": {"d": 5}})
    assert done.status_code == 200 and done.text == "OK"
    assert admin.conn.sismember(admin.keys("sock").done, NAME)
    assert web.simulate_get("/sock/stats.json").status_code == 200
