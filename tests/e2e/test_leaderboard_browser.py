"""The leaderboard and the front page in headless Chromium (Selenium, Debian's chromedriver), at
desktop (1280 px) and phone (400 px) widths: empty state, range buttons, zoom, stable colours,
a downloader's own chart, the project's description, repository and logo, no sideways scroll.

Screenshots go to tests/artifacts/; with UPDATE_SCREENSHOTS=1 also to docs/screenshots/ (the
ones committed there are taken this way).
"""

import math
import os
import shutil
import time

import pytest
from selenium.webdriver.common.action_chains import ActionChains

from support.browser import PHONE_WIDTH, Browser, needs_chromium
from support.counters import totals
from support.http_warrior import complete_over_http
from support.paths import ARTIFACTS, ROOT
from support.processes import start_live_server, stop_live_server
from tracker_core.admin import hq_verbs, item_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P = "leaderboard"
K = ProjectKeys(P)
DOWNLOADERS = ("alice", "bob-the-archiver", "carol", "dave", "eve", "frank_with_a_rather_long_name")
SHARES = dict(zip(DOWNLOADERS, (0.28, 0.22, 0.18, 0.14, 0.1, 0.08), strict=True))
HOUR_S, DAY_S = 3600, 86_400


def url(n: int) -> str:
    return f"https://www.example.com/pages/{n}/index.html?lang=en&q=a%20b#section {n}"


def page_errors(browser: Browser) -> list[str]:
    """Console errors but the live feed's (it is not started here: the page polls instead) and
    a stats.json answered 503 "being prepared" for a first ask of its parameters, which the page
    asks again after its Retry-After (tracker_api.public.public_cache); what it shows is checked apart."""
    return [
        e
        for e in browser.console_errors()
        if "WebSocket connection" not in e and not ("/stats.json?" in e and "status of 503" in e)
    ]


def shot(browser: Browser, name: str) -> None:
    browser.screenshot(ARTIFACTS / name)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        (ROOT / "docs" / "screenshots").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, ROOT / "docs" / "screenshots" / name)


def seed_history(r, now_s: int) -> None:
    """Forty days of a project's life as the done script and `tracker maintain` would have left
    them: the days roll-up, a week of hour hashes, the top downloaders' hourly history, and the
    counters (project and per downloader) those items add up to."""
    today, hour_now = now_s // DAY_S, now_s // HOUR_S
    per_day = {
        d: 300 + 15 * i + (100 if d % 7 in (2, 3) else 0) for i, d in enumerate(range(today - 40, today - 7))
    }
    # An hour's worth (20 to 51 items) the 42 the warriors finish in the current hour fits in, and
    # days the hours continue (about 780 a day when the hourly history takes over).
    per_hour = {
        h: 32 + round(12 * math.sin(2 * math.pi * (h % 24) / 24)) + (h - hour_now + 168) // 24
        # Every finished hour up to the current one (which the warriors below fill), none skipped.
        for h in range(hour_now - 7 * 24, hour_now)
    }
    backlog = 60_000
    for d, n in per_day.items():
        backlog -= n
        r.hset(K.days, str(d), f"{n} {n * 2_500_000} {n + n // 20} {n} {backlog}")
    for h, n in per_hour.items():
        r.hset(K.hour(h), mapping={"minutes": 60, "items_done": n, "bytes_done": n * 2_500_000})
    r.hset(K.settings, "created_ms", (today - 40) * DAY_S * 1000)
    total = sum(per_day.values()) + sum(per_hour.values())
    r.hincrby(K.stats, "items_done", total)
    r.hincrby(K.stats, "bytes_done", total * 2_500_000)
    for name, share in SHARES.items():
        r.hincrby(K.downloader_count, name, round(total * share))
        r.zincrby(K.downloader_bytes, round(total * share) * 2_500_000, name)
    # The hourly history, a point every six hours over the last thirty days.
    done_before = {d * DAY_S: n for d, n in per_day.items()} | {h * HOUR_S: n for h, n in per_hour.items()}
    for h in range(hour_now - 30 * 24, hour_now, 6):
        so_far = sum(n for t, n in done_before.items() if t < h * HOUR_S)
        point = {name: round(so_far * share) for name, share in SHARES.items()}
        r.xadd(K.top_history(HOUR_S), point, id=f"{h * HOUR_S * 1000}-0")


@pytest.fixture
def project(admin, r):
    project_verbs.create(
        admin,
        P,
        {
            "title": "Example Forums <rescue>",
            "description": "Saving the Example forums before they shut down on Friday. "
            "Run a warrior and pick this project.",
            "repository_url": "https://git.example.org/archive/example-forums-grab",
        },
    )
    item_verbs.add(admin, P, [url(n) for n in range(400)])
    return P


@pytest.mark.slow
@needs_chromium
def test_leaderboard_and_front_page_in_chromium_at_desktop_and_phone_widths(redis_url, project, admin, r):
    server = start_live_server(redis_url, workers=1)
    # The logo from another origin (localhost, the page is on 127.0.0.1): the CSP admits it.
    port = server.base.rsplit(":", 1)[1]
    project_verbs.set_settings(admin, P, {"logo_url": f"http://localhost:{port}/static/tracker-logo.svg"})
    desktop = Browser(height=900)
    try:
        # Nothing done yet: the page says what it waits for.
        desktop.navigate(f"{server.base}/{P}/")
        desktop.wait_for("document.getElementById('done').textContent === '0'")
        assert desktop.evaluate("!document.getElementById('empty').hidden")
        assert "waiting for warriors" in desktop.evaluate("document.body.innerText").lower()
        assert desktop.evaluate("document.querySelector('#chart-top .empty-row') !== null")
        assert desktop.evaluate("document.getElementById('title').textContent") == "Example Forums <rescue>"
        assert desktop.evaluate("document.getElementById('repository').href").startswith(
            "https://git.example.org/"
        )
        assert desktop.wait_for("document.querySelector('img.logo').naturalWidth") == 64

        seed_history(r, int(time.time()))
        for n, name in enumerate(DOWNLOADERS):
            complete_over_http(server.base, P, name, 12 - 2 * n, 3_000_000 * (12 - 2 * n), version="2")
        desktop.navigate(f"{server.base}/{P}/")
        done_total = totals(r, K.stats)["items_done"]
        desktop.wait_for(f"document.getElementById('done').textContent === '{done_total:,}'")
        assert desktop.evaluate("document.getElementById('empty').hidden")
        assert desktop.evaluate("document.getElementById('rtt-mean').textContent") != "–"
        assert desktop.evaluate("document.getElementById('rtt-median').textContent") != "–"
        # The default range is the week, hour by hour.
        desktop.wait_for("document.getElementById('chart-done').dataset.points == 168")
        assert desktop.evaluate("document.getElementById('step-label').textContent") == "per hour"

        # Stable colours: a downloader's swatch in the table is its line in the top chart.
        desktop.wait_for("document.querySelectorAll('#chart-top .u-legend .u-series').length > 6")
        colours = desktop.evaluate(
            """Object.fromEntries([...document.querySelectorAll('#chart-top .u-legend .u-series')].slice(1)
                 .map(s => [s.querySelector('.u-label').textContent,
                            getComputedStyle(s.querySelector('.u-marker')).borderColor]))"""
        )
        swatches = desktop.evaluate(
            """Object.fromEntries([...document.querySelectorAll('#downloaders tbody tr')]
                 .map(r => [r.dataset.downloader, getComputedStyle(r.querySelector('.swatch')).backgroundColor]))"""
        )
        assert set(DOWNLOADERS) <= set(colours)
        assert all(colours[name] == swatches[name] for name in DOWNLOADERS)

        # "all": the project's forty days, a point a day.
        desktop.click('.range button[data-range="all"]')
        desktop.wait_for("document.getElementById('chart-done').dataset.points == 41")
        assert desktop.evaluate("document.getElementById('step-label').textContent") == "per day"
        first = float(desktop.evaluate("document.getElementById('chart-done').dataset.first"))
        assert first == (int(time.time()) // DAY_S - 40) * DAY_S

        # Drag-select zooms every chart; "reset zoom" shows the whole range again.
        over = desktop.driver.find_element("css selector", "#chart-done .u-over")
        ActionChains(desktop.driver).move_to_element_with_offset(
            over, -100, 0
        ).click_and_hold().move_by_offset(150, 0).release().perform()
        desktop.wait_for("!document.getElementById('zoom-reset').disabled")
        # Every time chart shows the same narrower span.
        scales = (
            "['chart-done', 'chart-hourly', 'chart-bytes'].map(id => document.getElementById(id).dataset)"
        )
        zoomed = desktop.wait_for(f"(s => s[0].xmin && s.every(d => d.xmin === s[0].xmin) && s)({scales})")
        span = float(zoomed[0]["xmax"]) - float(zoomed[0]["xmin"])
        assert all(d["xmax"] == zoomed[0]["xmax"] for d in zoomed) and 0 < span < 30 * DAY_S
        desktop.click("#zoom-reset")
        desktop.wait_for("document.getElementById('zoom-reset').disabled")
        assert float(desktop.evaluate("document.getElementById('chart-done').dataset.xmin")) == first

        # A downloader's own chart, from a click on their row.
        desktop.click('.range button[data-range="week"]')
        desktop.wait_for("document.getElementById('chart-done').dataset.points == 168")
        desktop.click('#downloaders tbody tr[data-downloader="carol"] .who')
        desktop.wait_for("!document.getElementById('downloader-figure').hidden")
        desktop.wait_for("document.getElementById('chart-downloader').dataset.points > 1")
        # Within the week: it starts a week ago, at carol's count then.
        week_ago = float(desktop.evaluate("document.getElementById('chart-downloader').dataset.first"))
        assert abs(week_ago - (time.time() - 7 * DAY_S)) < 120
        assert desktop.evaluate("document.getElementById('downloader-name').textContent").startswith(
            f"carol ({int(r.hget(K.downloader_count, 'carol')):,} items"
        )
        assert (
            desktop.evaluate(
                "getComputedStyle(document.querySelector('#chart-downloader .u-legend .u-series:nth-child(2) .u-marker')).borderColor"
            )
            == swatches["carol"]
        )
        desktop.wait_for("document.querySelectorAll('#log li').length > 0")
        assert page_errors(desktop) == []
        shot(desktop, "leaderboard-desktop.png")

        # The front page, with a banner and a second project.
        project_verbs.create(
            admin, "wiki-mirror", {"title": "Wiki mirror", "description": "Every page of the wiki."}
        )
        item_verbs.add(admin, "wiki-mirror", [url(n) for n in range(50)])
        hq_verbs.set_fields(admin, {"tracker_banner_html": "<p>Example Forums close on <b>Friday</b>.</p>"})
        desktop.navigate(f"{server.base}/")
        time.sleep(1.1)  # the front page is cached for a second
        desktop.navigate(f"{server.base}/")
        desktop.wait_for("!!document.querySelector('.banner')")
        assert desktop.evaluate("document.querySelectorAll('li.project').length") == 2
        assert desktop.overflow_x() == 0
        shot(desktop, "front-desktop.png")
    finally:
        desktop.close()

    phone = Browser(width=PHONE_WIDTH, height=900, phone=True)
    try:
        phone.navigate(f"{server.base}/{P}/")
        phone.wait_for("document.getElementById('chart-done').dataset.points == 168")
        phone.wait_for("document.querySelectorAll('#chart-top .u-legend .u-series').length > 6")
        assert phone.evaluate("window.innerWidth") == PHONE_WIDTH
        assert phone.overflow_x() == 0  # no sideways scroll
        widest = phone.evaluate(
            "Math.max(...[...document.querySelectorAll('body *')].map(e => e.getBoundingClientRect().right))"
        )
        assert widest <= PHONE_WIDTH
        shot(phone, "leaderboard-phone.png")
        phone.navigate(f"{server.base}/")
        phone.wait_for("document.querySelectorAll('li.project').length === 2")
        assert phone.overflow_x() == 0
        shot(phone, "front-phone.png")
        assert page_errors(phone) == []
    finally:
        phone.close()
        stop_live_server(server)
