"""The front page GET /: listed projects with progress and leaderboard links, the HQ banner."""

import re

import orjson
import pytest
from falcon import testing

from support.browser import PHONE_WIDTH, Browser, needs_chromium
from support.paths import ARTIFACTS
from support.processes import start_live_server, stop_live_server
from tracker_api.app import create_app
from tracker_core.access import tokens
from tracker_core.admin import hq_verbs, item_verbs, project_verbs
from tracker_core.admin.errors import AdminError
from tracker_core.warriors import hq

LONG_TITLE = "Archive of https://www.example.com/a/very/long/path?with=query%20and#fragment/" + "x" * 100


def url(i: int) -> str:
    return f"https://www.example.com/u/{i}/page?q=a%20b&n={i}#frag {i}"


@pytest.fixture
def projects(admin, engine):
    project_verbs.create(admin, "shown", {"title": LONG_TITLE})
    project_verbs.create(admin, "second")
    project_verbs.create(admin, "hidden", {"warrior_listed": "0"})
    item_verbs.add(admin, "shown", [url(i) for i in range(10)])
    status, claimed = engine.claim("shown", "alice", "10.0.0.1", 4)
    engine.done("shown", "alice", "1", claimed[:3], [], "")
    item_verbs.add(admin, "hidden", ["secret-item"])
    return admin


def front(engine) -> str:
    """The page as a new process builds it (a running one caches it for a second)."""
    return testing.TestClient(create_app(engine)).simulate_get("/").text


def test_front_page_lists_listed_projects_with_progress_and_links(web, projects):
    res = web.simulate_get("/")
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/html")
    page = res.text
    assert 'href="/shown/"' in page and 'href="/second/"' in page
    assert "hidden" not in page  # unlisted: never shown
    row = re.search(r'<li class="project"><h2><a href="/shown/">.*?</li>', page).group(0)
    assert '<progress value="3" max="10">30.0 %</progress>' in row
    assert "<b>3</b> done" in row and "<b>1</b> out" in row and "<b>6</b> to do" in row
    assert "https://www.example.com/a/very/long/path?with=query%20and#fragment" in row
    # No script at all: it works under the pages' CSP, which the page gets.
    assert "<script" not in page
    assert "script-src 'self'" in res.headers["content-security-policy"]
    assert res.headers["x-frame-options"] == "DENY"


def test_titles_are_escaped_the_banner_is_allowlisted_html_a_global_admin_set(web, engine, projects, r):
    project_verbs.set_settings(projects, "second", {"title": "<img src=x onerror=alert(1)>"})
    banner = '<p>Grab <a href="https://example.org/x">the example</a> before <b>Friday</b>.</p>'
    global_token = tokens.create(r, "*")[0]
    project_token = tokens.create(r, "second")[0]

    def set_hq(token, body):
        return web.simulate_post(
            "/api/admin/hq",
            body=orjson.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    assert set_hq(project_token, {"tracker_banner_html": "<b>mine</b>"}).status_code == 403
    assert set_hq(global_token, {"tracker_banner_html": banner}).status_code == 200
    page = front(engine)
    # Kept to the allowlist: all of it is allowed; links get rel="noopener noreferrer".
    kept = banner.replace('">the', '" rel="noopener noreferrer">the')
    assert f'<div class="banner">{kept}</div>' in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    # The banner is the front page's: projects.json stays what warriors read.
    assert "tracker_banner_html" not in web.simulate_get("/projects.json").text
    # Its bound, at and past it; an empty value takes it away.
    limit = hq_verbs.HQ_MAX_CHARS["tracker_banner_html"]
    assert set_hq(global_token, {"tracker_banner_html": "x" * limit}).status_code == 200
    assert set_hq(global_token, {"tracker_banner_html": "x" * (limit + 1)}).status_code == 400
    hq_verbs.set_fields(projects, {"tracker_banner_html": ""})
    with pytest.raises(AdminError):
        hq_verbs.set_fields(projects, {"tracker_banner_html": None})
    assert 'class="banner"' not in front(engine)
    assert hq.document(r, "")["broadcast_message"] == ""


def test_no_listed_project_says_so(web, admin):
    project_verbs.create(admin, "hidden", {"warrior_listed": "0"})
    page = web.simulate_get("/").text
    assert "No project is listed" in page and "hidden" not in page


def test_the_page_is_built_at_most_once_a_second(projects, engine):
    import falcon

    from tracker_api.public.front_page import FrontPage

    ticks = iter([100.0, 100.2, 100.9, 101.1])
    app = falcon.App()
    app.add_route("/", FrontPage(engine, projects.conn, clock=lambda: next(ticks)))
    client = testing.TestClient(app)
    first = client.simulate_get("/").text
    project_verbs.set_settings(projects, "second", {"title": "Renamed"})
    assert client.simulate_get("/").text == first  # same second: served from cache
    assert client.simulate_get("/").text == first
    assert "Renamed" in client.simulate_get("/").text  # next second: built again


@pytest.mark.slow
@needs_chromium
def test_front_page_at_400_px_in_chromium(redis_url, projects):
    hq_verbs.set_fields(
        projects,
        {
            "tracker_banner_html": "<p>Banner with a long link https://www.example.com/"
            + "segment/" * 30
            + "</p>"
        },
    )
    server = start_live_server(redis_url, workers=1)
    browser = Browser(width=PHONE_WIDTH, height=900, phone=True)
    try:
        browser.navigate(f"{server.base}/")
        browser.wait_for("document.querySelectorAll('li.project').length === 2")
        # Styled from /static/ (allowed by the CSP) and nothing wider than the screen.
        assert (
            browser.evaluate("getComputedStyle(document.querySelector('.banner')).borderTopStyle") == "solid"
        )
        assert browser.evaluate("document.documentElement.scrollWidth") <= 400
        assert (
            browser.evaluate(
                "Math.max(...[...document.querySelectorAll('li.project')]"
                ".map(e => e.getBoundingClientRect().right))"
            )
            <= 400
        )
        assert (
            browser.evaluate(
                "document.querySelector('a[href=\"/shown/\"]').closest('li').querySelector('progress').value"
            )
            == 3
        )
        assert browser.evaluate(
            "[...document.querySelectorAll('li.project h2 a')].map(a => a.getAttribute('href')).sort()"
        ) == ["/second/", "/shown/"]
        browser.screenshot(ARTIFACTS / "front-page-400px.png")
        # The link leads to the project's leaderboard.
        browser.click('a[href="/shown/"]')
        browser.wait_for("location.pathname === '/shown/' && !!document.getElementById('done')")
    finally:
        browser.close()
        stop_live_server(server)
