"""The leaderboard page, its static files, the live feed (`tracker live`) and headless Chromium."""

import contextlib
import json
import re
import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from support import http_warrior
from support.browser import Browser, needs_chromium
from support.paths import ARTIFACTS, ROOT, TRACKER_BIN
from support.processes import (
    run_argv,
    run_ports,
    start,
    start_live_server,
    stop,
    stop_live_server,
    wait_for_port,
)
from support.projects import new_project
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.figures import stats
from tracker_core.infra.embedded import free_port

P = "proj"


@pytest.fixture
def project(admin):
    return new_project(
        admin, P, [f"item{n:03d}" for n in range(60)], settings={"title": "A <b>bold</b> rescue"}
    )


def start_feed(redis_url: str, interval_s: float = 0.2):
    port = free_port()
    process = start(
        [
            TRACKER_BIN,
            "--redis-url",
            redis_url,
            "live",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--interval",
            str(interval_s),
        ]
    )
    wait_for_port(port, process=process)
    return process, port


@pytest.fixture
def feed(redis_url):
    process, port = start_feed(redis_url)
    yield port
    stop(process)


def complete(engine, downloader, n, nbytes=1000):
    status, items = engine.claim(P, downloader, "10.0.0.1", n)
    assert status == 200
    assert engine.done(P, downloader, "1", items, ["data", nbytes], "{}").new == n
    return items


def receive(ws, kind):
    """The next message of KIND (log or snapshot)."""
    while True:
        message = json.loads(ws.recv(timeout=15))
        if message["type"] == kind:
            return message


# -- the page and its files -------------------------------------------------------------------


def test_page_is_served_with_the_project_filled_in_and_escaped(web, project):
    res = web.simulate_get(f"/{P}/")
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    assert '<meta name="tracker-project" content="proj">' in res.text
    assert "A &lt;b&gt;bold&lt;/b&gt; rescue" in res.text and "<b>bold</b>" not in res.text
    assert "{{" not in res.text


def test_page_loads_nothing_from_other_hosts(web, project):
    page = web.simulate_get(f"/{P}").text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(s.startswith("/static/") for s in sources)
    for source in sources:
        res = web.simulate_get(source)
        assert res.status_code == 200 and len(res.content) > 100
    js = web.simulate_get("/static/leaderboard.js").text
    assert "http://" not in js and "https://" not in js
    assert "MIT License" in (ROOT / "src/tracker_api/static/uPlot.LICENSE").read_text()


def test_unknown_project_and_static_name_are_404(web, project, r):
    assert web.simulate_get("/nope/").status_code == 404
    assert web.simulate_get("/static/../app.py").status_code == 404
    assert web.simulate_get("/static/secret.py").status_code == 404
    assert r.hget("tracker:stats", "bad_static_name") == "1"


def test_stats_json_carries_recent_log_newest_first(web, engine, project):
    first = complete(engine, "alice", 2)
    second = complete(engine, "bob", 1)
    log = web.simulate_get(f"/{P}/stats.json").json["recent_log"]
    assert [line["items"] for line in log] == [second, sorted(first, key=first.index)]
    assert log[0]["downloader"] == "bob" and log[0]["bytes"] == 1000


# -- the live feed ----------------------------------------------------------------------------


def test_new_viewer_gets_recent_log_then_snapshot_then_updates(engine, project, feed):
    earlier = complete(engine, "alice", 3)
    with connect(f"ws://127.0.0.1:{feed}/{P}") as ws:
        first = json.loads(ws.recv(timeout=15))
        assert first["type"] == "log" and first["lines"][0]["items"] == earlier
        snapshot = json.loads(ws.recv(timeout=15))
        assert snapshot["type"] == "snapshot" and snapshot["data"]["done"] == 3
        later = complete(engine, "bob", 2)
        assert receive(ws, "log")["lines"][0]["items"] == later
        assert receive(ws, "snapshot")["data"]["done"] == 5


def test_feed_coalesces_many_dones_into_few_messages(engine, project, redis_url):
    process, port = start_feed(redis_url, interval_s=1.0)
    try:
        with connect(f"ws://127.0.0.1:{port}/{P}") as ws:
            receive(ws, "snapshot")
            done_items = set()
            started = time.monotonic()
            for _ in range(30):
                done_items.update(complete(engine, "alice", 1))
            seen, log_messages = set(), 0
            while seen != done_items:
                message = receive(ws, "log")
                log_messages += 1
                for line in message["lines"]:
                    seen.update(line["items"])
            # At most one log message per interval (1 s) while dones arrive, plus the last one.
            assert log_messages <= int(time.monotonic() - started) + 2 < 30
    finally:
        stop(process)


def test_feed_refuses_unknown_project(feed, project):
    with connect(f"ws://127.0.0.1:{feed}/nope") as ws:
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=15)
        assert ws.close_code == 4404


def test_feed_without_redis_closes_viewers_so_pages_poll():
    process, port = start_feed(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with connect(f"ws://127.0.0.1:{port}/{P}") as ws:
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=15)
            assert ws.close_code == 1011
    finally:
        stop(process)


def test_feed_pushes_a_snapshot_when_settings_change(engine, project, feed, admin):
    with connect(f"ws://127.0.0.1:{feed}/{P}") as ws:
        receive(ws, "snapshot")
        project_verbs.set_settings(admin, P, {"title": "Renamed"})
        while receive(ws, "snapshot")["data"]["title"] != "Renamed":
            pass


@pytest.mark.slow
def test_tracker_run_starts_the_feed_and_stops_it(redis_url, project):
    port, live_port = run_ports()
    run = start(run_argv(["--redis-url", redis_url], port, live_port))
    try:
        wait_for_port(port, process=run)
        wait_for_port(live_port, process=run)
        with connect(f"ws://127.0.0.1:{live_port}/{P}") as ws:
            assert json.loads(ws.recv(timeout=15))["type"] == "log"
    finally:
        stop(run)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", live_port), timeout=1).close()


# -- the page in headless Chromium ------------------------------------------------------------


def complete_over_http(base, downloader, n):
    return http_warrior.complete_over_http(base, P, downloader, n, 2048 * n)


@contextlib.contextmanager
def live_page(redis_url):
    """The real server with the live feed, and headless Chromium: (server, feed process, browser)."""
    feed_process, feed_port = start_feed(redis_url)
    server = start_live_server(redis_url, workers=1, extra_env={"TRACKER_LIVE_URL": f":{feed_port}"})
    browser = Browser(height=1600)
    try:
        yield server, feed_process, browser
    finally:
        browser.close()
        stop_live_server(server)
        if feed_process.poll() is None:
            stop(feed_process)


@pytest.mark.slow
@needs_chromium
def test_leaderboard_in_headless_chromium(redis_url, project):
    with live_page(redis_url) as (server, feed_process, browser):
        browser.navigate(f"{server.base}/{P}/")
        assert browser.wait_for(
            "document.body.dataset.feed === 'live' && document.getElementById('done').textContent === '0'"
        )
        assert browser.evaluate("typeof uPlot") == "function"
        first = complete_over_http(server.base, "alice", 3)
        browser.wait_for("document.getElementById('done').textContent === '3'")
        assert browser.evaluate("document.getElementById('todo').textContent") == "57"
        assert browser.evaluate("document.getElementById('irsr').textContent") == "100.0%"
        assert browser.evaluate("document.getElementById('uniques').textContent") == "1 / 1"
        log = browser.wait_for(
            "document.querySelector('#log li') && document.querySelector('#log li').textContent"
        )
        assert "alice" in log and all(item in log for item in first)
        rows = browser.evaluate(
            "[...document.querySelectorAll('#downloaders tbody tr')].map(r => r.cells[1].textContent)"
        )
        assert rows == ["alice"]
        assert browser.evaluate("document.querySelectorAll('.charts canvas').length") >= 3
        assert browser.wait_for("document.getElementById('chart-top').dataset.points > 0")
        browser.screenshot(ARTIFACTS / "leaderboard.png")

        # The feed goes down: the page falls back to polling stats.json and keeps counting.
        stop(feed_process)
        browser.wait_for("document.body.dataset.feed === 'polling'")
        second = complete_over_http(server.base, "bob", 2)
        browser.wait_for("document.getElementById('done').textContent === '5'", timeout_s=30)
        log = browser.wait_for(
            "[...document.querySelectorAll('#log li')].map(li => li.textContent).join('\\n')"
        )
        assert all(item in log for item in second + first)
        browser.screenshot(ARTIFACTS / "leaderboard-polling.png")
    assert (ARTIFACTS / "leaderboard.png").stat().st_size > 10000


@pytest.mark.slow
@needs_chromium
def test_top_downloaders_chart_draws_history_on_first_load(redis_url, engine, r, project):
    complete(engine, "alice", 5)
    complete(engine, "bob", 2, nbytes=500)
    now_ms = int(time.time() * 1000)
    for hours_ago in (3, 2, 1):  # what `tracker maintain` recorded before anyone looked
        assert stats.record_top_history(r, P, now_ms - hours_ago * 3_600_000) == 2
    with live_page(redis_url) as (server, feed_process, browser):
        browser.navigate(f"{server.base}/{P}/")
        # Drawn from history at once: three recorded points (plus the one this load took).
        assert browser.wait_for("document.getElementById('chart-top').dataset.points >= 4")
        first = float(browser.evaluate("document.getElementById('chart-top').dataset.first"))
        assert abs(first - (now_ms / 1000 - 3 * 3600)) < 5
        legend = browser.evaluate("document.querySelector('#chart-top .u-legend').textContent")
        assert "alice" in legend and "bob" in legend
        points = int(browser.evaluate("document.getElementById('chart-top').dataset.points"))
        browser.wait_for("document.body.dataset.feed === 'live'")
        complete_over_http(server.base, "carol", 1)  # live snapshots extend the history
        browser.wait_for("document.querySelector('#chart-top .u-legend').textContent.includes('carol')")
        assert int(browser.evaluate("document.getElementById('chart-top').dataset.points")) > points
        browser.screenshot(ARTIFACTS / "leaderboard-top-history.png")


def test_many_watched_projects_each_get_their_updates_promptly(engine, admin, feed):
    # More projects than asyncio's default pool has threads (about six here). Idle watchers
    # each hold a thread for a whole XREAD block (1 s), so with a shared small pool one busy
    # project's update waited seconds for a thread; the feed's own pool has one per project.
    names = [f"many{n:02d}" for n in range(30)]
    for name in names:
        project_verbs.create(admin, name)
        item_verbs.add(admin, name, [f"{name}-item{i}" for i in range(5)])
    with contextlib.ExitStack() as stack:
        viewers = {name: stack.enter_context(connect(f"ws://127.0.0.1:{feed}/{name}")) for name in names}
        for ws in viewers.values():
            receive(ws, "snapshot")  # every watcher is running
        time.sleep(1.5)  # and idle, blocked in XREAD
        delays = []
        for name in names[::6]:
            status, items = engine.claim(name, "alice", "10.0.0.1", 1)
            assert engine.done(name, "alice", "1", items, ["data", 1], "{}").new == 1
            started = time.monotonic()
            assert receive(viewers[name], "log")["lines"][0]["items"] == items
            delays.append(time.monotonic() - started)
            time.sleep(0.3)
        assert max(delays) < 1.0, delays
