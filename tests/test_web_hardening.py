"""What anonymous clients can make the tracker store or show: the warrior registry's bounds,
the pages' headers (CSRF on login, no framing, no caching of admin answers, nosniff) and
/metrics behind a token.
"""
import json
import subprocess
import sys
import time

import orjson
import pytest
from falcon import testing

from conftest import start_live_server, stop_live_server
from tracker_api.app import create_app
from tracker_core import hq
from tracker_core import keys as keyspace

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def web(engine):
    return testing.TestClient(create_app(engine))


def register(web, ip, warrior=None):
    return web.simulate_post("/api/register.json", remote_addr=ip, headers=JSON,
                             body=orjson.dumps({"warrior": warrior or {"version": "0.10.3"}}))


def refused(r, field):
    return int(r.hget(keyspace.GLOBAL_STATS, field) or 0)


# -- the warrior registry ------------------------------------------------------------------

def test_registration_is_throttled_per_address_at_the_bound(web, r):
    for n in range(hq.REGISTRATIONS_PER_HOUR):
        res = register(web, "192.0.2.1")
        assert res.status_code == 200 and r.hexists(keyspace.WARRIORS, res.json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == hq.REGISTRATIONS_PER_HOUR
    # Just past it: still a 200 with an id (seesaw's Warrior would skip its update on anything
    # else), nothing stored, counted.
    res = register(web, "192.0.2.1")
    assert res.status_code == 200 and len(res.json["warrior_id"]) == 32
    assert not r.hexists(keyspace.WARRIORS, res.json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == hq.REGISTRATIONS_PER_HOUR
    assert refused(r, "register_throttled") == 1
    # Another address is not affected; the throttle's key expires with its window.
    assert r.hexists(keyspace.WARRIORS, register(web, "192.0.2.2").json["warrior_id"])
    ttl_ms = r.pttl(keyspace.warrior_registrations("192.0.2.1"))
    assert 0 < ttl_ms <= hq.REGISTRATION_WINDOW_MS


def test_ipv6_addresses_of_one_64_share_the_throttle(web, r):
    for n in range(hq.REGISTRATIONS_PER_HOUR):
        assert register(web, f"2001:db8:1:2::{n + 1:x}").status_code == 200
    res = register(web, "2001:db8:1:2:ffff:ffff:ffff:ffff")
    assert not r.hexists(keyspace.WARRIORS, res.json["warrior_id"])
    assert r.hexists(keyspace.WARRIORS, register(web, "2001:db8:1:3::1").json["warrior_id"])


def test_the_registry_holds_at_most_its_bound_and_makes_room_as_warriors_fall_silent(
        web, r, monkeypatch):
    monkeypatch.setenv("TRACKER_WARRIORS_MAX", "3")
    ids = [register(web, f"198.51.100.{n}").json["warrior_id"] for n in range(3)]
    assert r.hlen(keyspace.WARRIORS) == 3
    res = register(web, "198.51.100.9")
    assert res.status_code == 200 and not r.hexists(keyspace.WARRIORS, res.json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == 3 and refused(r, "register_registry_full") == 1
    r.zadd(keyspace.WARRIORS_SEEN, {ids[0]: 1})          # silent since 1970: forgotten
    assert r.hexists(keyspace.WARRIORS, register(web, "198.51.100.9").json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == 3 and not r.hexists(keyspace.WARRIORS, ids[0])


def test_a_record_keeps_only_the_version_ip_and_time(web, r):
    junk = {"version": "0.10.3", "notes": "x" * 1500, "nested": {"a": ["b" * 100] * 5}}
    res = register(web, "192.0.2.1", junk)
    stored = r.hget(keyspace.WARRIORS, res.json["warrior_id"])
    assert len(stored) <= hq.MAX_RECORD
    assert json.loads(stored)["warrior"] == {"version": "0.10.3"}
    worst = register(web, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
                     {"version": "\\\"" * (hq.MAX_VERSION_CHARS // 2)})
    assert len(r.hget(keyspace.WARRIORS, worst.json["warrior_id"])) <= hq.MAX_RECORD
    for version in ("x" * (hq.MAX_VERSION_CHARS + 1), "caf\u00e9", 3, "\n"):
        before = r.hlen(keyspace.WARRIORS)
        assert register(web, "192.0.2.3", {"version": version}).status_code == 400
        assert r.hlen(keyspace.WARRIORS) == before
    assert register(web, "192.0.2.3", {"version": "x" * hq.MAX_VERSION_CHARS}).status_code == 200


SEESAW_HQ = """
import collections, collections.abc, json, os, sys
collections.MutableMapping = collections.abc.MutableMapping   # seesaw 0.10.3 on Python 3.10+
from tornado import ioloop
from seesaw.config import realize
import seesaw.script.run_warrior   # what run-warrior loads first: Warrior reads its LOG_FORMAT
from seesaw.warrior import Warrior
base, work = sys.argv[1], sys.argv[2]
for sub in ("projects", "data"):
    os.makedirs(os.path.join(work, sub), exist_ok=True)
warrior = Warrior(os.path.join(work, "projects"), os.path.join(work, "data"), base + "/")
ioloop.IOLoop.current().run_sync(warrior.update_warrior_hq)
print("RESULT " + json.dumps({"warrior_id": realize(warrior.warrior_id),
                              "projects": sorted(warrior.projects),
                              "failed": warrior.contacting_hq_failed}))
"""


def run_seesaw_hq(server, work_dir) -> dict:
    """One round of seesaw 0.10.3's own Warrior.update_warrior_hq: register if it has no id
    yet, then post its update and load the projects from the answer."""
    done = subprocess.run([sys.executable, "-c", SEESAW_HQ, server.base, str(work_dir)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_seesaw_warrior_registers_heartbeats_and_works_past_the_throttle(redis_url, admin, r,
                                                                        tmp_path):
    admin.create_project("listed")
    server = start_live_server(redis_url, workers=1,
                               extra_env={"TRACKER_REGISTRATIONS_PER_HOUR": "1"})
    try:
        first = run_seesaw_hq(server, tmp_path / "one")
        assert first["projects"] == ["listed"] and not first["failed"]
        warrior_id = first["warrior_id"]
        assert r.hexists(keyspace.WARRIORS, warrior_id)
        # Its update every ten minutes is a heartbeat: seesaw sends the id inside "warrior".
        two_hours_ago = int(time.time() * 1000) - 7_200_000
        r.zadd(keyspace.WARRIORS_SEEN, {warrior_id: two_hours_ago})
        assert run_seesaw_hq(server, tmp_path / "one")["warrior_id"] == warrior_id
        assert r.zscore(keyspace.WARRIORS_SEEN, warrior_id) > two_hours_ago + 3_600_000
        # A second warrior from the same address is past the throttle: not registered, but it
        # gets an id and its project list, and reports no failure.
        second = run_seesaw_hq(server, tmp_path / "two")
        assert second["projects"] == ["listed"] and not second["failed"]
        assert second["warrior_id"] and not r.hexists(keyspace.WARRIORS, second["warrior_id"])
        assert refused(r, "register_throttled") == 1
    finally:
        stop_live_server(server)
