"""What anonymous clients can make the tracker store or show: the warrior registry's bounds,
the pages' headers (CSRF on login, no framing, no caching of admin answers, nosniff) and
/metrics behind a token.
"""

import json
import subprocess
import sys
import time
import urllib.parse

import orjson
import pytest
from falcon import testing

from support.browser import Browser, needs_chromium
from support.processes import start_live_server, stop_live_server
from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core import keyspace
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys
from tracker_core.warriors import hq

JSON = {"Content-Type": "application/json"}


def register(web, ip, warrior=None):
    return web.simulate_post(
        "/api/register.json",
        remote_addr=ip,
        headers=JSON,
        body=orjson.dumps({"warrior": warrior or {"version": "0.10.3"}}),
    )


def refused(r, field):
    return int(r.hget(keyspace.GLOBAL_STATS, field) or 0)


# -- the warrior registry ------------------------------------------------------------------


def test_registration_is_throttled_per_address_at_the_bound(web, r):
    for _ in range(hq.REGISTRATIONS_PER_HOUR):
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


def test_the_registry_holds_at_most_its_bound_and_makes_room_as_warriors_fall_silent(engine, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(warriors_max=3)))
    ids = [register(web, f"198.51.100.{n}").json["warrior_id"] for n in range(3)]
    assert r.hlen(keyspace.WARRIORS) == 3
    res = register(web, "198.51.100.9")
    assert res.status_code == 200 and not r.hexists(keyspace.WARRIORS, res.json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == 3 and refused(r, "register_registry_full") == 1
    r.zadd(keyspace.WARRIORS_SEEN, {ids[0]: 1})  # silent since 1970: forgotten
    assert r.hexists(keyspace.WARRIORS, register(web, "198.51.100.9").json["warrior_id"])
    assert r.hlen(keyspace.WARRIORS) == 3 and not r.hexists(keyspace.WARRIORS, ids[0])


def test_a_record_keeps_only_the_version_ip_and_time(web, r):
    junk = {"version": "0.10.3", "notes": "x" * 1500, "nested": {"a": ["b" * 100] * 5}}
    res = register(web, "192.0.2.1", junk)
    stored = r.hget(keyspace.WARRIORS, res.json["warrior_id"])
    assert len(stored) <= hq.MAX_RECORD
    assert json.loads(stored)["warrior"] == {"version": "0.10.3"}
    worst = register(
        web, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", {"version": '\\"' * (hq.MAX_VERSION_CHARS // 2)}
    )
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
    done = subprocess.run(
        [sys.executable, "-c", SEESAW_HQ, server.base, str(work_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def test_seesaw_warrior_registers_heartbeats_and_works_past_the_throttle(redis_url, admin, r, tmp_path):
    project_verbs.create(admin, "listed")
    server = start_live_server(redis_url, workers=1, extra_env={"TRACKER_REGISTRATIONS_PER_HOUR": "1"})
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
        # Refused twice: its registration, then its heartbeat's attempt to register the id.
        assert refused(r, "register_throttled") == 2
    finally:
        stop_live_server(server)


# -- pages: CSRF on login, framing, caching, sniffing --------------------------------------

P = "proj"


@pytest.fixture
def tokens_(admin):
    from tracker_core.access import tokens

    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ["https://example.com/a b?c=%20#d"])
    return {P: tokens.create(admin.conn, P)[0], "global": tokens.create(admin.conn, "*")[0]}


def login_form(web):
    res = web.simulate_get("/admin")
    return res.cookies["tracker_login"].value


def post_login(web, fields, cookie=None, origin=None):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie is not None:
        headers["Cookie"] = f"tracker_login={cookie}"
    if origin is not None:
        headers["Origin"] = origin
    return web.simulate_post("/admin", body=urllib.parse.urlencode(fields), headers=headers)


def test_login_needs_the_nonce_its_form_set(web, tokens_, r):
    token = tokens_[P]
    nonce = login_form(web)
    for fields, cookie in (
        ({"token": token}, None),  # a cross-site post
        ({"token": token, "csrf": nonce}, None),  # field, no cookie
        ({"token": token}, nonce),  # cookie, no field
        ({"token": token, "csrf": "0" * 32}, nonce),  # the wrong field
        ({"token": token, "csrf": ""}, ""),
    ):
        res = post_login(web, fields, cookie)
        assert res.status_code == 403 and "tracker_admin" not in res.cookies, fields
    assert refused(r, "admin_bad_csrf") == 5
    res = post_login(web, {"token": token, "csrf": nonce}, nonce, origin="https://evil.example")
    assert res.status_code == 403 and "tracker_admin" not in res.cookies
    assert refused(r, "admin_bad_origin") == 1
    res = post_login(web, {"token": token, "csrf": nonce}, nonce, origin="http://falconframework.org")
    assert res.status_code == 303 and res.cookies["tracker_admin"].value == token
    assert res.cookies["tracker_login"].value == ""  # the nonce is used up


def test_a_page_action_posted_from_another_site_is_refused(web, tokens_, r):
    from tracker_api.admin.pages import csrf_for

    res = web.simulate_post(
        f"/admin/{P}/block",
        body=urllib.parse.urlencode({"entry": "name:mallory", "csrf": csrf_for(tokens_[P])}),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "null",
            "Cookie": f"tracker_admin={tokens_[P]}",
        },
    )
    assert res.status_code == 403 and not r.smembers(ProjectKeys(P).blocked)


def assert_page_headers(res):
    assert res.headers["x-content-type-options"] == "nosniff"
    assert res.headers["x-frame-options"] == "DENY"
    csp = res.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp


def test_admin_pages_and_api_are_not_framed_cached_or_sniffed(web, tokens_):
    cookie = {"Cookie": f"tracker_admin={tokens_[P]}"}
    for path, headers in (("/admin", {}), ("/admin", cookie), (f"/admin/{P}", cookie)):
        res = web.simulate_get(path, headers=headers)
        assert res.status_code == 200
        assert_page_headers(res)
        assert res.headers["cache-control"] == "no-store"
    bearer = {"Authorization": f"Bearer {tokens_['global']}"}
    for path, headers, status in (
        ("/api/admin/projects", bearer, 200),
        ("/api/admin/projects", {}, 401),
        (f"/admin/{P}", {}, 401),
        ("/api/admin/nope", bearer, 404),
    ):
        res = web.simulate_get(path, headers=headers)
        assert res.status_code == status, path
        assert res.headers["cache-control"] == "no-store", path
        assert res.headers["x-content-type-options"] == "nosniff"


def test_public_answers_are_not_sniffed_and_pages_not_framed(web, tokens_):
    leaderboard = web.simulate_get(f"/{P}/")
    assert leaderboard.status_code == 200
    assert_page_headers(leaderboard)
    assert "no-store" not in leaderboard.headers.get("cache-control", "")
    for res in (
        web.simulate_get(f"/{P}/stats.json"),
        web.simulate_get("/static/leaderboard.js"),
        web.simulate_get("/projects.json"),
        web.simulate_get("/nope/at/all"),
        web.simulate_post(f"/{P}/request", body=b"{", headers=JSON),
        web.simulate_post(
            f"/{P}/request", headers=JSON, body=orjson.dumps({"downloader": "alice", "api_version": "2"})
        ),
    ):
        assert res.headers["x-content-type-options"] == "nosniff"
        # Warriors' answers are not HTML: no page headers on the hot path.
        assert "content-security-policy" not in res.headers


@pytest.mark.slow
@needs_chromium
def test_admin_pages_work_in_chromium_under_their_policy(redis_url, admin, tmp_path):
    """Log in through the form, see the project page styled from /static/, and find the policy
    in force: an inline script is not run."""
    from tracker_core.access import tokens

    project_verbs.create(admin, P)
    item_verbs.add(admin, P, [f"https://example.com/{n}?q=%20" for n in range(3)])
    token = tokens.create(admin.conn, P)[0]
    server = start_live_server(redis_url, workers=1)
    browser = Browser()
    try:
        browser.navigate(f"{server.base}/admin")
        browser.run(
            f"document.querySelector('input[name=token]').value = {json.dumps(token)};"
            "document.querySelector('form').submit();"
        )
        browser.wait_for(f"!!document.querySelector('a[href=\"/admin/{P}\"]')")
        browser.navigate(f"{server.base}/admin/{P}")
        assert browser.wait_for("document.body && document.body.textContent.includes('done: 0')")
        # admin.css applied (a stylesheet from /static/ is allowed)...
        assert browser.evaluate("getComputedStyle(document.body).maxWidth") == "900px"
        # ...an inline script is not.
        assert browser.run(
            "const s = document.createElement('script');"
            "s.textContent = 'window.inlineRan = true';"
            "document.body.appendChild(s); return window.inlineRan === undefined;"
        )
        # A form still posts (form-action 'self') and comes back with the result.
        browser.run(
            "document.querySelector('form[action$=\"/block\"] input[name=entry]')"
            ".value = 'name:mallory';"
            "document.querySelector('form[action$=\"/block\"]').submit();"
        )
        browser.wait_for("document.body && document.body.textContent.includes('blocked name:mallory')")
    finally:
        browser.close()
        stop_live_server(server)
    assert "name:mallory" in admin.conn.smembers(ProjectKeys(P).blocked)


# -- /metrics ------------------------------------------------------------------------------


def metric_projects(text) -> set[str]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.labels["project"]
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if "project" in s.labels
    }


METRICS_TOKEN = "prometheus-secret-0123456789"


def metrics_web(engine):
    """The app as `tracker serve` builds it with a metrics token (AppConfig, not the environment)."""
    return testing.TestClient(create_app(engine, config=AppConfig(metrics_token=METRICS_TOKEN)))


@pytest.fixture
def metrics_setup(admin):
    from tracker_core.access import tokens

    project_verbs.create(admin, "public")
    project_verbs.create(admin, "hidden")
    project_verbs.create(admin, "hidden2")
    project_verbs.set_settings(admin, "hidden", {"warrior_listed": "0"})
    project_verbs.set_settings(admin, "hidden2", {"warrior_listed": "0"})
    admin.conn.hincrby(keyspace.GLOBAL_STATS, "bad_path", 1)
    return {"global": tokens.create(admin.conn, "*")[0], "hidden": tokens.create(admin.conn, "hidden")[0]}


def scrape(web, token=None, scheme="Bearer"):
    headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
    return web.simulate_get("/metrics", headers=headers)


def test_anonymous_metrics_show_only_listed_projects(engine, metrics_setup):
    web = metrics_web(engine)
    res = scrape(web)
    assert res.status_code == 200 and metric_projects(res.text) == {"public"}
    assert "hidden" not in res.text and "tracker_refused" not in res.text


def test_the_metrics_token_or_a_global_admin_token_sees_everything(engine, metrics_setup):
    web = metrics_web(engine)
    for token in (METRICS_TOKEN, metrics_setup["global"]):
        res = scrape(web, token)
        assert res.status_code == 200
        assert metric_projects(res.text) == {"public", "hidden", "hidden2"}
        assert 'tracker_refused_total{reason="bad_path"}' in res.text
    # A project's token adds its own project only.
    assert metric_projects(scrape(web, metrics_setup["hidden"]).text) == {"public", "hidden"}


@pytest.mark.parametrize(
    "token,scheme",
    [
        ("wrong", "Bearer"),
        ("", "Bearer"),
        ("prometheus-secret-0123456789", "Basic"),
        ("trk_000000000000_" + "x" * 43, "Bearer"),
        ("prometheus-secret-012345678", "Bearer"),
    ],
)
def test_a_wrong_metrics_token_is_refused_and_counted(engine, metrics_setup, r, token, scheme):
    web = metrics_web(engine)
    res = scrape(web, token, scheme)
    assert res.status_code == 401 and "hidden" not in res.text
    assert (
        refused(r, "metrics_unauthenticated")
        + refused(r, "metrics_bad_token")
        + refused(r, "admin_bad_token")
        == 1
    )


def test_no_spelling_of_metrics_shows_an_unlisted_project_through_bjoern(redis_url, admin):
    project_verbs.create(admin, "public")
    project_verbs.create(admin, "hidden")
    project_verbs.set_settings(admin, "hidden", {"warrior_listed": "0"})
    server = start_live_server(redis_url, workers=1)
    try:
        import socket

        for path in (
            "/metrics",
            "/metrics#x",
            "/metrics/",
            "//metrics",
            "/metrics?",
            "/metrics/?x#y",
            "/%6detrics",
            "/METRICS",
            "/metrics;x",
        ):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            assert b"hidden" not in answer, path
    finally:
        stop_live_server(server)


def test_haproxy_refuses_every_spelling_of_metrics_and_nothing_else():
    """The deny rule's regular expression, over the URL-decoded path HAProxy matches it on
    (HAProxy's `path` stops at "?" and keeps "#"; matched with -i)."""
    import re

    from support.paths import ROOT

    defaults = (ROOT / "ansible/roles/loadbalancer/defaults/main.yml").read_text()
    (value,) = re.findall(r"^loadbalancer_private_paths_regex: '(.*)'$", defaults, re.M)
    rule = re.compile(value.replace("''", "'"), re.IGNORECASE)
    for path in (
        "/metrics",
        "/metrics#x",
        "/metrics/",
        "//metrics",
        "/METRICS",
        "/Metrics/#",
        "/metrics;x",
        "///metrics//",
        "/metrics/x",
    ):
        assert rule.search(path), path
    for path in ("/metricsfoo", "/proj/metrics", "/proj", "/admin", "/metrics-project/"):
        assert not rule.search(path), path
