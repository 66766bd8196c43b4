"""The item lookup of the admin pages (/admin/P/item) in headless Chromium against the real
server: a 4 KB URL name typed into its form shows the item's story (who did it, when, from
which IP, how many bytes; the segment file of an offloaded one), styled under the pages' policy,
never scrolling sideways at 400 px; a name too long is refused in the page with its reason."""

import time
import urllib.parse

import pytest

from support.browser import PHONE_WIDTH, Browser, log_in, needs_chromium
from support.paths import ARTIFACTS
from support.processes import start_live_server, stop_live_server
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance

P = "lookup"
K = ProjectKeys(P)
LONG = "https://example.com/forum/thread?id=42&q=a b%20c#post-" + "x/" * 2000  # about 4 KB


@pytest.fixture
def setup(admin, engine, clock, r, tmp_path):
    segdir = tmp_path / "segments"
    project_verbs.create(admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"})
    clock.now = time.time() - 3600  # an hour ago: the page shows a recent time
    item_verbs.add(admin, P, [LONG])
    _, claimed = engine.claim(P, "alice", "10.0.0.1", 1)
    assert engine.done(P, "alice", "1.2", claimed, ["example.com", 3000], "id", "10.0.0.1").new == 1
    disk = [f"https://example.com/user/{n}?tab=posts" for n in range(20)]
    item_verbs.add(admin, P, disk)
    assert maintenance.maintain_project(r, P, segdir)["offloaded"] == 10
    on_disk = sorted(set(disk) - r.smembers(K.todo))[0]
    return segdir, on_disk, tokens.create(admin.conn, P, "lookup test")[0]


def look_up(browser: Browser, base: str, name: str) -> str:
    """Type NAME into the lookup form, submit it, and return the story's text."""
    browser.navigate(f"{base}/admin/{P}/item")
    browser.run(
        "const f = document.querySelector('form[action$=\"/item\"]'); f.name.value = arguments[0]; f.submit();",
        name,
    )
    browser.wait_for("!!document.querySelector('dl.story')")
    return browser.evaluate("document.querySelector('section.card').innerText")


@pytest.mark.slow
@needs_chromium
def test_the_item_lookup_shows_the_story_in_chromium(redis_url, setup):
    segdir, on_disk, token = setup
    server = start_live_server(redis_url, workers=1, extra_env={"TRACKER_SEGMENTS_DIR": str(segdir)})
    desktop = phone = None
    try:
        desktop = Browser()
        log_in(desktop, server.base, token, P)
        text = look_up(desktop, server.base, LONG)
        assert desktop.evaluate("document.querySelector('dd.status').innerText") == "done"
        row = desktop.evaluate("[...document.querySelectorAll('table.done-log td')].map(td => td.innerText)")
        assert row[1:] == ["alice", "10.0.0.1", "3,000", "1", "1.2"]
        assert row[0].endswith("UTC") and LONG[:60] in text
        assert desktop.console_errors() == [] and desktop.overflow_x() == 0
        desktop.screenshot(ARTIFACTS / "admin-item-desktop.png")
        text = look_up(desktop, server.base, on_disk)
        assert "offloaded" in text and "returns to todo" in text
        assert "Never done" in text
        # A name too long: refused in the page, with the reason, nothing looked up.
        desktop.navigate(f"{server.base}/admin/{P}/item?" + urllib.parse.urlencode({"name": "x" * 4097}))
        assert "4096" in desktop.evaluate("document.body.innerText")
        assert desktop.evaluate("document.querySelector('dl.story')") is None

        phone = Browser(width=PHONE_WIDTH, height=900, phone=True)
        log_in(phone, server.base, token, P)
        look_up(phone, server.base, LONG)
        assert phone.overflow_x() == 0
        phone.screenshot(ARTIFACTS / "admin-item-phone.png")
    finally:
        for browser in (desktop, phone):
            if browser is not None:
                browser.close()
        stop_live_server(server)
