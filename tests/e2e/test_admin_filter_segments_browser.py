"""The Bloom filter and segments pages and the block reindex form in headless Chromium against the
real server: a segment of URL names exported through its button arrives as a download the
segment reader reads, a file chosen in the import form comes back as a segment, the filter's
form sets an empty filter's kind and shows the refusal of a full one in one line; no console
error, no sideways scroll at 400 px."""

import time

import pytest

from support.browser import PHONE_WIDTH, Browser, log_in, needs_chromium
from support.paths import ARTIFACTS
from support.processes import start_live_server, stop_live_server
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs, segment_verbs
from tracker_core.maintainer import maintenance
from tracker_core.offload.segment_file import read_segment, write_segment

P, EMPTY = "browse", "fresh"
URLS = [f"https://example.com/a b/{n}?q=%20x&y=1#frag/{n}" for n in range(20)]


@pytest.fixture
def setup(admin, r, tmp_path):
    segdir = tmp_path / "segments"
    project_verbs.create(admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"})
    project_verbs.create(admin, EMPTY)
    item_verbs.add(admin, P, URLS)
    assert maintenance.maintain_project(r, P, segdir)["offloaded"] >= 10
    return segdir, tokens.create(admin.conn, "*", "browser test")[0]


def submit(browser: Browser, action: str) -> str:
    """Submit the form posting to ACTION; the text of the page that answers."""
    browser.run("window.__old = document.body;")
    browser.click(f'form[action$="/{action}"] button')
    browser.wait_for("document.body !== window.__old && document.readyState === 'complete'")
    return browser.evaluate("document.body.innerText")


def wait_for_file(folder, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = [p for p in folder.iterdir() if not p.name.endswith(".crdownload")]
        if done:
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"no download in {folder}")


@pytest.mark.slow
@needs_chromium
def test_filter_segments_and_reindex_forms_in_chromium(redis_url, admin, setup, tmp_path):
    segdir, token = setup
    server = start_live_server(redis_url, workers=1, extra_env={"TRACKER_SEGMENTS_DIR": str(segdir)})
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    desktop = phone = None
    try:
        desktop = Browser()
        log_in(desktop, server.base, token, P)
        base = f"{server.base}/admin"

        # The filter: a full one refuses a new geometry in one line; an empty one takes it.
        desktop.navigate(f"{base}/{P}/filter")
        assert desktop.evaluate("document.querySelector('.filter-items').innerText") == "20"
        assert desktop.evaluate("document.querySelectorAll('table.layers tbody tr').length") == 1
        desktop.screenshot(ARTIFACTS / "admin-filter-desktop.png")
        desktop.run("document.querySelector('select[name=kind]').value = 'wide';")
        text = submit(desktop, "filter")
        assert "already holds items" in text
        assert desktop.evaluate("document.querySelectorAll('p.error').length") == 1
        assert [e.split(" - ", 1)[1] for e in desktop.console_errors()] == [
            "Failed to load resource: the server responded with a status of 409 (Conflict)"
        ]
        desktop.navigate(f"{base}/{EMPTY}/filter")
        desktop.run("document.querySelector('select[name=kind]').value = 'fingerprint';")
        assert "filter set: fingerprint" in submit(desktop, "filter")
        assert desktop.evaluate("document.querySelector('.filter-kind').innerText") == "fingerprint"
        assert desktop.console_errors() == [] and desktop.overflow_x() == 0

        # Export: the button's download is the segment, and it leaves the project.
        desktop.driver.execute_cdp_cmd(
            "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
        desktop.navigate(f"{base}/{P}/segments")
        listed = segment_verbs.list_segments(admin, P)["segments"]
        number = min(listed, key=int)
        desktop.click(f'form[action$="/segment-export"] input[value="{number}"] ~ button')
        exported = wait_for_file(downloads)
        assert exported.name == f"{P}-segment-{number}.zst"
        names = read_segment(exported)
        assert len(names) == listed[number]["items"] and set(names) <= set(URLS)
        assert number not in segment_verbs.list_segments(admin, P)["segments"]

        # Import: the file chosen comes back as a segment; a file of new names goes to todo.
        desktop.navigate(f"{base}/{P}/segments")
        desktop.driver.find_element("css selector", "input[type=file][name=file]").send_keys(str(exported))
        text = submit(desktop, "segment-import")
        assert f"imported {len(names)} items as segment" in text
        fresh = tmp_path / "fresh.zst"
        write_segment(fresh, ["https://example.org/new?a=1#b", "https://example.org/new 2"])
        desktop.driver.find_element("css selector", "input[type=file][name=file]").send_keys(str(fresh))
        assert "imported 2 items into todo through the Bloom filter" in submit(desktop, "segment-import")
        assert desktop.console_errors() == [] and desktop.overflow_x() == 0
        desktop.screenshot(ARTIFACTS / "admin-segments-desktop.png")

        # Block reindex, a global form.
        desktop.navigate(f"{base}/-/blocks")
        assert "reindexed the blocks of 2 projects" in submit(desktop, "blocks-reindex")

        phone = Browser(width=PHONE_WIDTH, height=900, phone=True)
        log_in(phone, server.base, token, P)
        for view in ("filter", "segments"):
            phone.navigate(f"{base}/{P}/{view}")
            assert phone.overflow_x() == 0, view
        phone.screenshot(ARTIFACTS / "admin-segments-phone.png")
        assert phone.console_errors() == []
    finally:
        for browser in (desktop, phone):
            if browser is not None:
                browser.close()
        stop_live_server(server)
