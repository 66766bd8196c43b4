"""The warrior HQ's heartbeats: seesaw 0.10.3's own Warrior.update_warrior_hq against the real
server, what the registry keeps of each update (validated, bounded), and "warriors online"
(last heartbeat within hq.ONLINE_WITHIN_MS) wherever it shows: the admin registry, the CLI,
stats.json and /metrics."""

import itertools
import json
import subprocess
import sys
import time
import urllib.request

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_api.web.config import AppConfig
from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.admin import project_verbs
from tracker_core.infra import redis_clock
from tracker_core.warriors import hq

JSON = {"Content-Type": "application/json"}
FRESH = itertools.count(1)
LISTED = "urls-archive"

# seesaw's Warrior in its own process (tornado's IOLoop and the collections alias seesaw
# needs stay out of pytest). Each line on stdin is one round: set the warrior's config as its
# web UI would, then run update_warrior_hq; print what the warrior then holds.
SEESAW_ROUNDS = r"""
import collections, collections.abc, json, os, sys, types
collections.MutableMapping = collections.abc.MutableMapping   # seesaw 0.10.3 on Python 3.10+
from tornado import ioloop
from seesaw.config import realize
import seesaw.script.run_warrior   # what run-warrior loads first: Warrior reads its LOG_FORMAT
from seesaw.warrior import Warrior
base, work = sys.argv[1], sys.argv[2]
for sub in ("projects", "data"):
    os.makedirs(os.path.join(work, sub), exist_ok=True)
warrior = Warrior(os.path.join(work, "projects"), os.path.join(work, "data"), base + "/")
for line in sys.stdin:
    round_ = json.loads(line)
    warrior.config_manager.set_value("downloader", round_["downloader"])
    warrior.config_manager.set_value("selected_project", round_["selected_project"])
    # The position as seesaw finds it: handle_lat_lng reads a geolocation page.
    warrior.handle_lat_lng(types.SimpleNamespace(body=(
        "geoip-demo-results-tbodyLatitude/Longitude</td> <td>%s</td>" % round_["lat_lng"])))
    ioloop.IOLoop.current().run_sync(warrior.update_warrior_hq)
    print("RESULT " + json.dumps({
        "warrior_id": realize(warrior.warrior_id), "projects": sorted(warrior.projects),
        "failed": warrior.contacting_hq_failed, "broadcast": warrior.broadcast_message,
        "rebooting": warrior.forced_reboot_timeout is not None}), flush=True)
"""


class SeesawWarrior:
    def __init__(self, base: str, work_dir):
        self.process = subprocess.Popen(
            [sys.executable, "-c", SEESAW_ROUNDS, base, str(work_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def update(self, **config) -> dict:
        self.process.stdin.write(json.dumps(config) + "\n")
        self.process.stdin.flush()
        seen = []
        for line in self.process.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
            seen.append(line)
        pytest.fail("seesaw's Warrior exited:\n" + "".join(seen)[-3000:])

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def get(server, path, token=None) -> bytes:
    request = urllib.request.Request(server.base + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read()


def online_everywhere(server, r, redis_url, token) -> set:
    """Warriors online as every view shows them: registry API, CLI, stats.json, /metrics."""
    api = orjson.loads(get(server, "/api/admin/warriors", token))
    cli = json.loads(
        CliRunner().invoke(main, ["--redis-url", redis_url, "admin", "warriors", "--json"]).output
    )
    # stats.json is built once a second per process and size: a new size is a fresh one.
    page = orjson.loads(get(server, f"/{LISTED}/stats.json?top={next(FRESH)}"))
    # With a token: fresh (an anonymous scrape is the renderer's, up to a second old).
    metrics = get(server, "/metrics", token).decode()
    gauge = [line for line in metrics.splitlines() if line.startswith("tracker_warriors_online ")]
    return {
        api["online"],
        cli.get("online", "CLI shows no online count"),
        page["warriors_online"],
        page["warriors_active"],
        float(gauge[0].split()[1]) if gauge else "no gauge",
        hq.online_count(r),
    }


def test_seesaw_warrior_heartbeats_are_recorded_and_count_it_online(
    live_server, redis_url, admin, r, tmp_path
):
    project_verbs.create(admin, LISTED)
    hq.set_fields(r, {"broadcast_message": "<p>hello warriors</p>", "seesaw_version": "0.10.3"})
    token = tokens.create(r, "*")[0]
    warrior = SeesawWarrior(live_server.base, tmp_path)
    try:
        before = int(time.time() * 1000)
        first = warrior.update(
            downloader="hq-tester", selected_project="old-project", lat_lng="51.5074/-0.1278"
        )
        after = int(time.time() * 1000)
        # What the warrior reads from the answer still works: its projects, the broadcast
        # message, the seesaw version (equal: no reboot), no failure.
        assert first["projects"] == [LISTED] and not first["failed"]
        assert first["broadcast"] == "<p>hello warriors</p>" and not first["rebooting"]
        listing = hq.registry(r)
        assert len(listing["warriors"]) == 1 and listing["online"] == 1
        record = listing["warriors"][0]
        assert record["warrior_id"] == first["warrior_id"]
        assert record["downloader"] == "hq-tester"
        assert record["selected_project"] == "old-project"
        assert record["lat_lng"] == [51.5074, -0.1278]
        assert record["warrior"] == {"version": "0.10.3"} and record["ip"] == "127.0.0.1"
        # Redis's time (tracker_core.infra.redis_clock), which this machine's agrees with to a few ms.
        assert before - 1000 <= record["last_heartbeat_ms"] <= after + 1000 and record["online"]
        assert online_everywhere(live_server, r, redis_url, token) == {1}

        # Silent for longer than the online window: listed, not online anywhere.
        silent_since = int(time.time() * 1000) - hq.ONLINE_WITHIN_MS - 1000
        r.zadd(keyspace.WARRIORS_SEEN, {first["warrior_id"]: silent_since})
        assert not hq.registry(r)["warriors"][0]["online"]
        assert online_everywhere(live_server, r, redis_url, token) == {0}

        # Its next update (ten minutes later in real life) moves last_seen and replaces what
        # the heartbeat carries; the registration's fields stay.
        second = warrior.update(
            downloader="hq-tester-2", selected_project="auto", lat_lng="-33.8688/151.2093"
        )
        assert second["warrior_id"] == first["warrior_id"] and not second["failed"]
        record2 = hq.registry(r)["warriors"][0]
        assert r.zscore(keyspace.WARRIORS_SEEN, first["warrior_id"]) > silent_since + 60_000
        assert record2["last_heartbeat_ms"] >= record["last_heartbeat_ms"] and record2["online"]
        assert (record2["downloader"], record2["selected_project"], record2["lat_lng"]) == (
            "hq-tester-2",
            "auto",
            [-33.8688, 151.2093],
        )
        assert record2["registered_ms"] == record["registered_ms"]
        assert record2["warrior"] == {"version": "0.10.3"}
        assert r.hlen(keyspace.WARRIORS) == 1
        assert len(r.hget(keyspace.WARRIORS, first["warrior_id"])) <= hq.MAX_RECORD
        assert online_everywhere(live_server, r, redis_url, token) == {1}
    finally:
        warrior.close()


# -- what update.json keeps, field by field (through the app) --------------------------------


def register(web) -> str:
    res = web.simulate_post(
        "/api/register.json", headers=JSON, body=orjson.dumps({"warrior": {"version": "0.10.3"}})
    )
    return res.json["warrior_id"]


def update(web, body, user_agent="ArchiveTeam Warrior/0.10.3 Standalone"):
    return web.simulate_post(
        "/api/update.json", body=orjson.dumps(body), headers={**JSON, "User-Agent": user_agent}
    )


def record_of(r, warrior_id) -> dict:
    return json.loads(r.hget(keyspace.WARRIORS, warrior_id))


def refused(r, field) -> int:
    return int(r.hget(keyspace.GLOBAL_STATS, f"heartbeat_bad_{field}") or 0)


def test_the_answer_keeps_everything_the_warrior_reads(web, r, admin):
    project_verbs.create(admin, LISTED)
    hq.set_fields(r, {"auto_project": LISTED, "broadcast_message": "<b>hi</b>", "seesaw_version": "0.10.3"})
    warrior_id = register(web)
    res = update(
        web,
        {
            "warrior": {
                "warrior_id": warrior_id,
                "lat_lng": None,
                "downloader": None,
                "selected_project": "none",
            }
        },
    )
    assert res.status_code == 200
    assert res.json["warrior"] == {"seesaw_version": "0.10.3"}
    assert res.json["auto_project"] == LISTED and res.json["broadcast_message"] == "<b>hi</b>"
    assert [p["name"] for p in res.json["projects"]] == [LISTED] and "refused" not in res.json
    # seesaw's nulls (no position found, no nickname set yet) are nothing to keep.
    kept = record_of(r, warrior_id)
    assert "lat_lng" not in kept and "downloader" not in kept
    assert kept["selected_project"] == "none"


def test_the_top_level_form_is_taken_too(web, r):
    warrior_id = register(web)
    res = update(
        web,
        {
            "warrior_id": warrior_id,
            "downloader": "top-level",
            "selected_project": LISTED,
            "lat_lng": [10, 20],
            "version": "0.9.1",
        },
    )
    assert res.status_code == 200
    kept = record_of(r, warrior_id)
    assert (kept["downloader"], kept["selected_project"], kept["lat_lng"]) == ("top-level", LISTED, [10, 20])
    assert kept["warrior"] == {"version": "0.9.1"}  # the body's version before the agent's


@pytest.mark.parametrize(
    "field, good, bad",
    [
        ("downloader", "abc", "ab"),
        ("downloader", "x" * 30, "x" * 31),
        ("downloader", "a-b_C9", "caf\u00e9"),
        ("downloader", "a-b_C9", 12345),
        ("selected_project", "p" * 64, "p" * 65),
        ("selected_project", "auto", "Upper"),
        ("selected_project", "a_b-c", ["list"]),
        ("lat_lng", [90, 180], [90.000001, 0]),
        ("lat_lng", [-90, -180], [0, -180.000001]),
        ("lat_lng", "51.5/-0.1", "NaN/0"),
        ("lat_lng", "51.5,-0.1", "51.5/-0.1/3"),
        ("lat_lng", [1.5, 2.5], [True, 1]),
        ("lat_lng", [1, 2], [1, 2, 3]),
        ("lat_lng", "1/" + "0" * (hq.MAX_LAT_LNG_CHARS - 2), "1/" + "0" * (hq.MAX_LAT_LNG_CHARS - 1)),
        ("lat_lng", [0, 0], {"lat": 1, "lng": 2}),
        ("version", "v" * hq.MAX_VERSION_CHARS, "v" * (hq.MAX_VERSION_CHARS + 1)),
        ("version", "0.10.3-dev", "0.10.3\n"),
    ],
)
def test_each_field_is_kept_at_its_limit_and_refused_just_past_it(web, r, field, good, bad):
    warrior_id = register(web)
    res = update(web, {"warrior": {"warrior_id": warrior_id, field: good}})
    assert res.status_code == 200 and "refused" not in res.json
    kept = record_of(r, warrior_id)
    stored = kept["warrior"]["version"] if field == "version" else kept[field]
    assert stored == (hq._lat_lng(good) if field == "lat_lng" else good)
    seen = r.zscore(keyspace.WARRIORS_SEEN, warrior_id)
    # Past the limit: not kept (the good value stays), counted, named in the answer, and the
    # answer is still the document with a 200 (seesaw drops its project list on anything else).
    res = update(web, {"warrior": {"warrior_id": warrior_id, field: bad}})
    assert res.status_code == 200 and "projects" in res.json
    assert res.json["refused"] == hq.HEARTBEAT_REASONS[field]
    assert record_of(r, warrior_id) == {**kept, "seen_ms": record_of(r, warrior_id)["seen_ms"]}
    assert refused(r, field) == 1
    assert r.zscore(keyspace.WARRIORS_SEEN, warrior_id) >= seen  # still alive


def test_the_version_comes_from_seesaws_user_agent(web, r):
    warrior_id = register(web)
    update(web, {"warrior": {"warrior_id": warrior_id}}, "ArchiveTeam Warrior/0.10.4 Warrior")
    assert record_of(r, warrior_id)["warrior"] == {"version": "0.10.4"}
    update(web, {"warrior": {"warrior_id": warrior_id}}, "curl/8.0")
    assert record_of(r, warrior_id)["warrior"] == {"version": "0.10.4"}


def test_a_forgotten_id_is_registered_again_by_its_heartbeat(engine, r):
    # seesaw keeps its id in config.json and never registers again: after the registry forgot
    # it (30 days silent, or lost), its next heartbeat registers it anew, throttled as usual
    # (here one registration an hour per address: the second id is past it).
    web = testing.TestClient(create_app(engine, config=AppConfig(registrations_per_hour=1)))
    forgotten = "0123456789abcdef" * 2
    res = update(
        web, {"warrior": {"warrior_id": forgotten, "downloader": "alice", "selected_project": "demo"}}
    )
    assert res.status_code == 200 and "projects" in res.json
    kept = record_of(r, forgotten)
    assert kept["downloader"] == "alice" and kept["selected_project"] == "demo"
    assert hq.online_count(r) == 1
    other = "fedcba9876543210" * 2
    assert update(web, {"warrior": {"warrior_id": other}}).status_code == 200
    assert r.hget(keyspace.WARRIORS, other) is None  # throttled: not stored
    assert int(r.hget(keyspace.GLOBAL_STATS, "register_throttled")) == 1


def test_an_unknown_id_or_a_bad_one_adds_nothing(web, r):
    for body in (
        {"warrior": {"warrior_id": "ghost", "downloader": "abc"}},
        {"warrior_id": "x" * 65},
        {"warrior_id": 7},
        {"warrior": "text"},
        {},
    ):
        res = update(web, body)
        assert res.status_code == 200 and "projects" in res.json
    assert r.hlen(keyspace.WARRIORS) == 0 and r.zcard(keyspace.WARRIORS_SEEN) == 0
    assert web.simulate_post("/api/update.json", body=b"[1]", headers=JSON).status_code == 400


def test_the_longest_record_fits_and_its_size_in_redis(web, r):
    warrior_id = hq.register(
        r, {"version": '\\"' * (hq.MAX_VERSION_CHARS // 2)}, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"
    )
    update(
        web,
        {
            "warrior": {
                "warrior_id": warrior_id,
                "downloader": "d" * 30,
                "selected_project": "p" * 64,
                "lat_lng": [-89.123456, -179.123456],
            }
        },
        "ArchiveTeam Warrior/" + '\\"' * (hq.MAX_VERSION_CHARS // 2),
    )
    stored = r.hget(keyspace.WARRIORS, warrior_id)
    kept = json.loads(stored)
    assert kept["downloader"] == "d" * 30 and kept["lat_lng"] == [-89.123456, -179.123456]
    assert len(stored) <= hq.MAX_RECORD


def test_online_means_a_heartbeat_within_the_window(web, r):
    registered_only = register(web)
    beating = register(web)
    update(web, {"warrior": {"warrior_id": beating}})
    listing = {w["warrior_id"]: w for w in hq.registry(r)["warriors"]}
    # A registration is not a heartbeat: listed, not online, no heartbeat time.
    assert not listing[registered_only]["online"]
    assert listing[registered_only]["last_heartbeat_ms"] is None
    assert listing[registered_only]["last_seen_ms"] == listing[registered_only]["registered_ms"]
    assert listing[beating]["online"] and hq.online_count(r) == 1
    # The window is measured on the process's Redis clock (the one online_count reads), not on
    # this machine's wall clock: the two differ by up to half a sync's round trip.
    now = redis_clock.now_ms(r)
    r.zadd(keyspace.WARRIORS_SEEN, {beating: now - hq.ONLINE_WITHIN_MS + 5_000})  # just within
    assert hq.online_count(r) == 1
    r.zadd(keyspace.WARRIORS_SEEN, {beating: now - hq.ONLINE_WITHIN_MS - 1})  # just past
    assert hq.online_count(r) == 0
    assert hq.ONLINE_WITHIN_MS == 25 * 60_000  # two of seesaw's ten-minute updates, and 5 min


def test_the_hq_endpoints_are_served_by_their_own_module(r, admin):
    """hq_api alone, on a bare Falcon app: the three public endpoints need no admin API."""
    import falcon

    from tracker_api.admin import api_routes
    from tracker_api.warrior_api import hq_routes

    project_verbs.create(admin, LISTED)
    app = falcon.App()
    hq_routes.add_hq_routes(app, r)
    web = testing.TestClient(app)
    assert [p["name"] for p in web.simulate_get("/projects.json").json["projects"]] == [LISTED]
    warrior_id = web.simulate_post(
        "/api/register.json", headers=JSON, body=orjson.dumps({"warrior": {"version": "0.10.3"}})
    ).json["warrior_id"]
    update = {"warrior": {"warrior_id": warrior_id, "downloader": "alice", "selected_project": LISTED}}
    res = web.simulate_post("/api/update.json", headers=JSON, body=orjson.dumps(update))
    assert res.status_code == 200 and "projects" in res.json
    assert r.zscore(keyspace.WARRIORS_SEEN, warrior_id) is not None
    assert not any(
        hasattr(api_routes, name) for name in ("ProjectsDocument", "RegisterWarrior", "UpdateWarrior")
    )
