"""Admin tokens against the real server (`tracker serve`, bjoern workers) and the `tracker`
command: a token made by the CLI with a two-second expiry works in the API, the pages and
/metrics, then is answered exactly as a wrong token is; a read-only two-project token reads and
is refused a change; and the token page in headless Chromium creates a scoped, read-only,
expiring token and lists last uses."""

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from support.browser import Browser, log_in, needs_chromium
from support.paths import TRACKER_BIN
from support.processes import start_live_server, stop_live_server
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, project_verbs

A, B, C = "alpha", "beta", "gamma"


@pytest.fixture
def projects(admin):
    for project in (A, B, C):
        project_verbs.create(admin, project)
        item_verbs.add(admin, project, [f"https://example.com/{project}/page?n={n}" for n in range(3)])


def fetch(url, token=None, cookie=None, method="GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if cookie:
        request.add_header("Cookie", f"tracker_admin={cookie}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def cli(redis_url, *args) -> dict:
    done = subprocess.run(
        [str(TRACKER_BIN), "--redis-url", redis_url, "--json", "admin", "token", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.mark.slow
def test_an_expiring_read_only_token_through_the_real_server(redis_url, r, projects):
    server = start_live_server(redis_url, workers=1)
    try:
        made = cli(
            redis_url, "create", "--scope", f"{A},{B}", "--read-only", "--expires", "3s", "--note", "ci"
        )
        token = made["token"]
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        base = server.base
        reads = {
            "api": lambda t: fetch(f"{base}/api/admin/projects/{A}/queues", t),
            "page": lambda t: fetch(f"{base}/admin/{B}", cookie=t),
            "metrics": lambda t: fetch(f"{base}/metrics", t),
        }
        for face, read in reads.items():
            assert read(token)[0] == 200, face
        assert json.loads(fetch(f"{base}/api/admin/projects", token)[1]) == {"projects": [A, B]}
        assert fetch(f"{base}/api/admin/projects/{C}/queues", token)[0] == 403
        status, body = fetch(f"{base}/api/admin/projects/{A}/pause", token, method="POST")
        assert (status, json.loads(body)) == (403, {"error": "this token is read-only: it changes nothing"})
        listed = {t["token_id"]: t for t in cli(redis_url, "list")["tokens"]}
        assert listed[made["token_id"]]["last_used_ms"] is not None  # the server recorded its use
        time.sleep(max(0.0, (made["expires_ms"] - int(r.time()[0]) * 1000) / 1000) + 0.5)
        for face, read in reads.items():
            assert read(token) == read(wrong), face
            assert read(token)[0] == 401, face
    finally:
        stop_live_server(server)


@pytest.mark.slow
@needs_chromium
def test_the_token_page_in_chromium(redis_url, r, projects, admin):
    operator = tokens.create(admin.conn, "*", "operator laptop")[0]
    server = start_live_server(redis_url, workers=1)
    browser = Browser()
    try:
        log_in(browser, server.base, operator, A)
        browser.navigate(f"{server.base}/admin/-/tokens")
        browser.run(
            "const f = document.querySelector('form[action$=\"/token-create\"]');"
            "f.scope.value = arguments[0]; f.read_only.checked = true; f.expires.value = '30d';"
            "f.note.value = 'watcher'; f.submit();",
            f"{A},{B}",
        )
        browser.wait_for("!!document.querySelector('.once input.secret')")
        shown = browser.evaluate("document.querySelector('.once input.secret').value")
        made = tokens.verify(r, shown)
        assert (made.scope, made.read_only, made.note) == (f"{A},{B}", True, "watcher")
        assert made.expires_ms is not None
        assert "read-only, expires" in browser.evaluate("document.querySelector('.once').innerText")
        rows = browser.evaluate("[...document.querySelectorAll('table.list tbody tr')].map(r => r.innerText)")
        mine = next(row for row in rows if made.token_id in row)
        assert "read-only" in mine and "never" in mine  # not used yet
        operator_row = next(row for row in rows if "operator laptop" in row)
        assert "UTC" in operator_row.split("\t")[6]  # the operator's own last use: the login
        assert browser.overflow_x() == 0 and browser.console_errors() == []

        # Logged in with the read-only token: the banner, its projects, a form refused.
        browser.run("document.querySelector('form.logout').submit();")
        browser.wait_for("!!document.querySelector('form.login')")
        log_in(browser, server.base, shown, A)
        assert browser.evaluate("document.body.innerText.includes('This token is read-only')")
        assert not browser.evaluate(f"!!document.querySelector('a[href=\"/admin/{C}\"]')")
        browser.navigate(f"{server.base}/admin/{A}")
        browser.run("document.querySelector('form[action$=\"/pause\"]').submit();")
        browser.wait_for("document.querySelector('h1').innerText.startsWith('403')")
        assert browser.evaluate("document.body.innerText.includes('it changes nothing')")
        assert project_verbs.show(admin, A)["settings"]["paused"] in ("0", 0, False)
    finally:
        browser.close()
        stop_live_server(server)
