"""Nothing acknowledged is lost: Redis restarts from its AOF, killed workers are replaced."""

import http.client
import os
import signal
import time

import orjson
import pytest

from support.processes import start_live_server, stop_live_server, worker_pids
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

K = ProjectKeys("dur")


def test_acknowledged_state_survives_a_redis_restart(tmp_path):
    port = free_port()
    server = EmbeddedRedis(tmp_path, port=port).start()
    try:
        admin = AdminContext.from_url(server.url)
        project_verbs.create(admin, "dur")
        item_verbs.add(admin, "dur", [f"i{n}" for n in range(50)])
        engine = Engine(server.url)
        _, items = engine.claim("dur", "alice", "ip", 10)
        assert engine.done("dur", "alice", "", items[:6], ["data", 60], "null").new == 6
        server.stop()
        server = EmbeddedRedis(tmp_path, port=port).start()
        # The engine's raw connection notices the restart and reconnects by itself.
        status = census_verbs.status(AdminContext.from_url(server.url), "dur")
        assert (status["todo_total"], status["out"], status["done"]) == (40, 4, 6)
        _, more = engine.claim("dur", "alice", "ip", 5)
        assert len(more) == 5
    finally:
        server.stop()


@pytest.mark.slow
def test_killed_worker_is_replaced_and_loses_nothing(admin, redis_url, r):
    project_verbs.create(admin, "dur")
    item_verbs.add(admin, "dur", [f"i{n}" for n in range(100)])
    server = start_live_server(redis_url, workers=2)
    try:

        def post(path, body):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("POST", path, orjson.dumps(body), {"Connection": "close"})
            res = conn.getresponse()
            return res.status, res.read()

        status, body = post("/dur/multi=10//request", {"downloader": "alice", "api_version": "2"})
        names = orjson.loads(body)["item_name"]
        assert post("/dur/done", {"downloader": "alice", "item": names}) == (200, b"OK")

        def workers():
            return set(worker_pids(server.process.pid))

        killed = next(iter(workers()))
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not (len(workers()) == 2 and killed not in workers()):
            assert time.monotonic() < deadline, "the killed worker was not replaced"
            time.sleep(0.1)
        for _ in range(20):  # both workers answer
            status, _ = post("/dur/request", {"downloader": "bob", "api_version": "2"})
            assert status == 200
        assert r.scard(K.done) == 10 and r.zcard(K.out) == 20 and r.scard(K.todo) == 70
    finally:
        stop_live_server(server)
