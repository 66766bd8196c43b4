"""The access log: one line per request on tracker.access, with the method, the path without
its query or secrets, the status, the milliseconds and the client (client_ip.py's rule); nothing
at all while it is switched off."""

import io
import logging
import re

import pytest
from falcon import testing

from tracker_api import logs
from tracker_api.app import create_app
from tracker_api.config import AppConfig
from tracker_core.admin import projects

LINE = re.compile(r"INFO tracker\.access: (\S+) (\S+) (\d{3}|-) (\d+\.\d)ms (\S+)")
SECRET = "0123456789abcdef0123"


@pytest.fixture
def access_lines(monkeypatch):
    """Switch the access log on, into a buffer; LINES() parses what was logged so far."""
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    buffer = io.StringIO()
    logs.setup("info", access_log=True, stream=buffer)
    lines = lambda: [LINE.search(line).groups() for line in buffer.getvalue().splitlines()]  # noqa: E731
    lines.text = buffer.getvalue
    yield lines
    logs.reset()


def test_each_request_is_one_line_without_query_or_secret(engine, admin, access_lines):
    projects.create(admin, "proj")
    client = testing.TestClient(create_app(engine))
    client.simulate_get("/proj/stats.json", query_string="token=abcd1234efgh&x=1")
    client.simulate_post(f"/backfeed/legacy/proj-{SECRET}", body="item\n")
    client.simulate_get("/nowhere/at/all")
    lines = access_lines()
    assert [(method, path, status) for method, path, status, _, _ in lines] == [
        ("GET", "/proj/stats.json", "200"),
        ("POST", "/backfeed/legacy/proj-***", "403"),
        ("GET", "/nowhere/at/all", "404"),
    ]
    assert all(ip == "127.0.0.1" and float(ms) >= 0 for *_, ms, ip in lines)
    text = "\n".join(" ".join(line) for line in lines)
    assert SECRET not in text and "abcd1234efgh" not in text


def test_an_item_url_in_the_path_cannot_forge_a_line(engine, admin, access_lines):
    projects.create(admin, "proj")
    client = testing.TestClient(create_app(engine))
    name = "https://example.com/a?x=1#frag\n2026-01-01T00:00:00 INFO tracker.access: GET /forged 200 0.0ms 6.6.6.6"
    client.simulate_get("/proj/items/" + name.replace("?", "%3F").replace("#", "%23") + ".json")
    (line,) = access_lines.text().splitlines()
    assert "frag\\n2026-01-01T00:00:00" in line
    assert re.search(r" 200 \d+\.\dms 127\.0\.0\.1$", line), line


def test_behind_proxies_the_client_is_the_one_client_ip_takes(engine, access_lines):
    client = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=1)))
    client.simulate_get("/", headers={"X-Forwarded-For": "10.9.9.9, 203.0.113.7"})
    client.simulate_get("/", headers={"X-Forwarded-For": "not-an-address"})
    assert [ip for *_, ip in access_lines()] == ["203.0.113.7", "127.0.0.1"]


def test_switched_off_the_app_is_not_wrapped_and_logs_nothing(engine, monkeypatch):
    buffer = io.StringIO()
    logs.setup("debug", access_log=False, stream=buffer)
    try:
        app = create_app(engine)
        assert app.__qualname__ == "_collapse_slashes.<locals>.wsgi"
        testing.TestClient(app).simulate_get("/")
        assert "tracker.access" not in buffer.getvalue()
    finally:
        logs.reset()
    assert not logging.getLogger("tracker").handlers
