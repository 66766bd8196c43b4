"""No script in a hostile banner or marker_html runs, in headless Chromium.

Every payload below runs when a page holds it as written: each is first shown to run in the same
harness (so a test that sees nothing run is not blind). Then, through a real `tracker serve` with
the payloads stored straight into Redis (as a tracker before the allowlist kept them):
- the front page, as served (its CSP would also stop inline script, so the page's HTML is also
  opened again without any CSP, from a file), must run none of them;
- a page built from projects.json the way a map inserts markers (innerHTML, and a fragment
  parsed with its scripts live, as jQuery's .html() does) must run none of them.
A payload that runs sets document.title to "ran:" and its name.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from support.browser import Browser, needs_chromium
from support.processes import start_live_server, stop_live_server
from tracker_core import keyspace
from tracker_core.admin import project_verbs
from tracker_core.keyspace import ProjectKeys

P = "mapped"
TITLE = "untouched"


def ran(name: str) -> str:
    return f"document.title='ran:{name}'"


# name -> markup that runs script once in a page, by parsing, inserting, loading or a click.
PAYLOADS = {
    "script": f"<script>{ran('script')}</script>",
    "img onerror": f'<img src="x:" onerror="{ran("img onerror")}">',
    "svg onload": f'<svg onload="{ran("svg onload")}"></svg>',
    "iframe javascript": f'<iframe src="javascript:parent.{ran("iframe javascript")}"></iframe>',
    "iframe srcdoc": f'<iframe srcdoc="<script>parent.{ran("iframe srcdoc")}</script>"></iframe>',
    # void(): a javascript: URL whose value is a string would replace the page with it.
    "link javascript": f'<a href="javascript:void({ran("link javascript")})">x</a>',
    "link entity": f'<a href="&#106;avascript:void({ran("link entity")})">x</a>',
    "details ontoggle": f'<details open ontoggle="{ran("details ontoggle")}">x</details>',
    "nested script": f"<<script>script>{ran('nested script')}<</script>/script><script>{ran('nested script')}</script>",
}

# The harness: the markup in a page, links clicked (only javascript: ones: nothing navigates away).
CLICK_SCRIPT_LINKS = (
    "document.querySelectorAll('a').forEach(a => { if (a.protocol === 'javascript:') a.click(); });"
)


def page_with(body: str) -> str:
    return f"<!doctype html><html><head><meta charset=utf-8><title>{TITLE}</title></head><body>{body}</body></html>"


def markers_page(markers: list[str]) -> str:
    """A page inserting each marker as a map does: innerHTML (handlers run), and a parsed
    fragment (scripts run too, as with jQuery's .html())."""
    data = json.dumps(markers).replace("</", "<\\/")
    script = (
        f"const markers = {data};"
        "for (const m of markers) {"
        " const div = document.createElement('div'); div.innerHTML = m; document.body.appendChild(div);"
        " document.body.appendChild(document.createRange().createContextualFragment(m));"
        "}"
    )
    return page_with(f"<script>{script}</script>")


def title_after(browser: Browser, url: str) -> str:
    browser.navigate(url)
    browser.run(CLICK_SCRIPT_LINKS)
    browser.run("return new Promise(done => setTimeout(done, 300));")  # iframes, toggles, errors
    return browser.evaluate("document.title")


def open_html(browser: Browser, tmp_path, name: str, html: str) -> str:
    path = tmp_path / name
    path.write_text(html)
    return title_after(browser, path.as_uri())


@pytest.fixture(scope="module")
def browser():
    instance = Browser()
    yield instance
    instance.close()


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("name", PAYLOADS)
def test_each_payload_runs_when_kept_as_written(browser, tmp_path, name):
    """The control: the harness sees each payload run, as a banner and as a marker."""
    assert open_html(browser, tmp_path, "banner.html", page_with(PAYLOADS[name])) == f"ran:{name}"
    assert open_html(browser, tmp_path, "markers.html", markers_page([PAYLOADS[name]])) == f"ran:{name}"


@pytest.fixture
def hostile_server(redis_url, admin, r):
    project_verbs.create(admin, P)
    # The allowed parts first: an unclosed payload may take in what follows (it is its content).
    hostile = '<b>bold</b> <a href="https://example.org/">site</a> ' + "".join(PAYLOADS.values())
    # Stored as an older tracker kept them, past the admin verbs: served, they are cleaned again.
    r.hset(keyspace.HQ, "tracker_banner_html", hostile)
    r.hset(ProjectKeys(P).settings, "marker_html", hostile)
    server = start_live_server(redis_url, workers=1)
    yield server
    stop_live_server(server)


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as res:
        return res.read()


@pytest.mark.slow
@needs_chromium
def test_the_front_page_runs_nothing_of_a_hostile_banner(browser, hostile_server, tmp_path):
    assert title_after(browser, f"{hostile_server.base}/") == "tracker"
    banner = browser.evaluate("document.querySelector('.banner').innerHTML")
    # Sanitised, not dropped: the allowed parts are there, nothing else.
    assert "<b>bold</b>" in banner and 'href="https://example.org/"' in banner
    assert (
        browser.evaluate(
            "document.querySelectorAll('.banner script, .banner img, .banner svg, .banner iframe,"
            " .banner details, .banner math').length"
        )
        == 0
    )
    assert (
        browser.evaluate(
            "[...document.querySelectorAll('.banner *')].flatMap(e => [...e.attributes])"
            ".filter(a => a.name.startsWith('on') || /^\\s*javascript:/i.test(a.value)).length"
        )
        == 0
    )
    # The same page with no CSP at all: still nothing runs.
    page = (
        fetch(f"{hostile_server.base}/").decode().replace("<title>tracker</title>", f"<title>{TITLE}</title>")
    )
    assert open_html(browser, tmp_path, "front.html", page) == TITLE


@pytest.mark.slow
@needs_chromium
def test_markers_from_projects_json_run_nothing(browser, hostile_server, tmp_path):
    document = json.loads(fetch(f"{hostile_server.base}/projects.json"))
    markers = [entry["marker_html"] for entry in document["projects"]]
    assert len(markers) == 1 and "<b>bold</b>" in markers[0]
    assert open_html(browser, tmp_path, "markers.html", markers_page(markers)) == TITLE
