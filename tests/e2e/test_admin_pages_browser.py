"""The admin pages in headless Chromium against the real server: log in through the form, every
page styled under the pages' policy (no console errors), none scrolling sideways at 400 px, a
refused form showing its reason beside what was typed.

Screenshots go to tests/artifacts/; with UPDATE_SCREENSHOTS=1 also to docs/screenshots/ (the
committed admin-login.png, admin-project-desktop.png and admin-project-phone.png), and only then
the documentation's other pages (admin-settings.png, admin-queues.png, admin-claims.png,
admin-tokens.png, admin-hq.png, admin-error.png): their content is checked on every run.
"""

import base64
import json
import os
import shutil
import time

import pytest

from support import browser as support_browser
from support.browser import PHONE_WIDTH, Browser, needs_chromium
from support.paths import ARTIFACTS, ROOT
from support.processes import start_live_server, stop_live_server
from tracker_api.admin.pages.project_pages import ProjectPages
from tracker_core.access import tokens
from tracker_core.admin import hq_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P = "demo"
# Every project page the app has (a page added there is checked here too).
VIEWS = tuple("" if view == "overview" else f"/{view}" for view in ProjectPages.VIEWS)
GLOBAL_VIEWS = (
    "/admin",
    "/admin/-/tokens",
    "/admin/-/blocks",
    "/admin/-/hq",
    "/admin/-/warriors",
    "/admin/-/audit",
)


UPDATE_SCREENSHOTS = os.environ.get("UPDATE_SCREENSHOTS") == "1"
# Pages shot for the documentation, each with what it must show on every run.
DOCUMENTED = {
    f"/admin/{P}/settings": (
        "admin-settings.png",
        ("rsync://uploads.example.net/demo/", "120/m", "https://git.example.org/archive/demo-grab"),
    ),
    f"/admin/{P}/queues?sample=secondary&count=8": ("admin-queues.png", ("https://example.com/thread/",)),
    f"/admin/{P}/claims": ("admin-claims.png", ("alice", "bob", "10.0.0.2", "https://example.com/user/")),
    "/admin/-/tokens": ("admin-tokens.png", ("operator laptop", "CI for the demo project")),
    "/admin/-/hq": ("admin-hq.png", ("Example.com closes on Friday", "0.8.5")),
}


def shoot(browser: Browser, name: str) -> None:
    browser.screenshot(ARTIFACTS / name)
    if UPDATE_SCREENSHOTS:
        (ROOT / "docs" / "screenshots").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACTS / name, ROOT / "docs" / "screenshots" / name)


def page_text(browser: Browser) -> str:
    """What the page shows, form fields' values included (innerText leaves them out)."""
    return browser.evaluate(
        "document.body.innerText + [...document.querySelectorAll('input, textarea')].map(e => e.value).join(' ')"
    )


def shoot_around(browser: Browser, selector: str, name: str, margin: int = 10) -> None:
    """The element SELECTOR picks (its card, when it sits in one) and a margin, not the whole page."""
    box = browser.evaluate(
        f"(e => (e.closest('.card') || e).getBoundingClientRect().toJSON())"
        f"(document.querySelector({json.dumps(selector)}))"
    )
    top = box["y"] + browser.evaluate("window.scrollY")
    clip = {
        "x": max(box["x"] - margin, 0),
        "y": max(top - margin, 0),
        "width": box["width"] + 2 * margin,
        "height": box["height"] + 2 * margin,
        "scale": 1,
    }
    shot = browser.driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
    )
    (ARTIFACTS / name).write_bytes(base64.b64decode(shot["data"]))
    (ROOT / "docs" / "screenshots").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ARTIFACTS / name, ROOT / "docs" / "screenshots" / name)


def log_in(browser: Browser, base: str, token: str) -> None:
    support_browser.log_in(browser, base, token, P)


@pytest.fixture
def demo(admin, engine, clock):
    project_verbs.create(
        admin,
        P,
        {
            "title": "Demo: example.com before it closes",
            "description": "Every user page and thread of example.com.",
            "repository_url": "https://git.example.org/archive/demo-grab",
            "rate_limit": "600",
        },
    )
    project_verbs.create(admin, "forum")
    item_verbs.add(admin, P, [f"https://example.com/user/{n}?tab=posts&page=%20{n}" for n in range(40)])
    item_verbs.add(admin, P, [f"https://example.com/thread/{n}" for n in range(12)], queue="secondary")
    limit_verbs.add(admin, P, "users", "prefix:https://example.com/user/", "120/m")
    limit_verbs.block(admin, "ip:203.0.113.0/24", P)
    project_verbs.set_upload_target(admin, P, "rsync://uploads.example.net/demo/")
    # Claims of the last half hour, so the pages (and their screenshots) show recent times.
    clock.now = time.time() - 30 * 60
    engine.claim(P, "alice", "10.0.0.1", 3)
    clock.advance(12 * 60)
    engine.claim(P, "bob", "10.0.0.2", 2)
    admin.conn.hset(ProjectKeys(P).dead, "https://example.com/user/broken", json.dumps({"times_claimed": 6}))
    hq_verbs.set_fields(
        admin,
        {
            "broadcast_message": "Example.com closes on Friday: pick the Demo project.",
            "tracker_banner_html": "<p>Example.com closes on <b>Friday</b>.</p>",
        },
    )
    tokens.create(admin.conn, P, "CI for the demo project")
    return tokens.create(admin.conn, "*", "operator laptop")[0]


@pytest.mark.slow
@needs_chromium
def test_admin_pages_in_chromium_at_desktop_and_phone_widths(redis_url, admin, demo):
    server = start_live_server(redis_url, workers=1)
    desktop = phone = None
    try:
        desktop = Browser()
        desktop.navigate(f"{server.base}/admin")
        assert desktop.evaluate("getComputedStyle(document.querySelector('button')).borderRadius") == "5px"
        shoot(desktop, "admin-login.png")
        log_in(desktop, server.base, demo)
        for path in [f"/admin/{P}{v}" for v in VIEWS] + list(GLOBAL_VIEWS):
            desktop.navigate(server.base + path)
            assert desktop.evaluate("document.querySelectorAll('form[method=post]').length") >= 1, path
            assert desktop.overflow_x() == 0, path
            assert desktop.console_errors() == [], path  # nothing refused by the policy
        for path, (name, shown) in DOCUMENTED.items():
            desktop.navigate(server.base + path)
            text = page_text(desktop)
            assert all(s in text for s in shown), (path, [s for s in shown if s not in text])
            assert demo not in desktop.driver.page_source, path  # a token's text is never shown again
            if UPDATE_SCREENSHOTS:
                shoot(desktop, name)
        desktop.navigate(f"{server.base}/admin/{P}")
        assert desktop.wait_for("document.body.textContent.includes('out: 5')")
        shoot(desktop, "admin-project-desktop.png")

        # A refused form comes back with its reason inside it and what was typed kept.
        desktop.navigate(f"{server.base}/admin/{P}/settings")
        desktop.screenshot(ARTIFACTS / "admin-settings-desktop.png")  # for review, not committed
        desktop.run(
            "const f = document.querySelector('form[action$=\"/limit-add\"]');"
            "f.name.value = 'threads'; f.pattern.value = 'nokind:x'; f.rate.value = '5/m'; f.submit();"
        )
        desktop.wait_for("!!document.querySelector('form[action$=\"/limit-add\"] .error')")
        assert (
            desktop.evaluate("document.querySelector('form[action$=\"/limit-add\"]').pattern.value")
            == "nokind:x"
        )
        assert [x["name"] for x in limit_verbs.list_limits(admin, P)] == ["users"]
        if UPDATE_SCREENSHOTS:
            shoot_around(desktop, 'form[action$="/limit-add"]', "admin-error.png")

        phone = Browser(width=PHONE_WIDTH, height=900, phone=True)
        log_in(phone, server.base, demo)
        for path in [f"/admin/{P}{v}" for v in VIEWS] + list(GLOBAL_VIEWS):
            phone.navigate(server.base + path)
            assert phone.overflow_x() == 0, path
        phone.navigate(f"{server.base}/admin/{P}")
        shoot(phone, "admin-project-phone.png")
    finally:
        for browser in (desktop, phone):
            if browser is not None:
                browser.close()
        stop_live_server(server)
