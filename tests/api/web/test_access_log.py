"""The access log: one line per request on tracker.access, with the method, the path without
its query or secrets, the status, the milliseconds and the client (client_ip.py's rule); nothing
at all while it is switched off."""

import io
import logging
import re
import socket

import pytest
from falcon import testing

from support.processes import start_serve, stop, wait_for_line
from support.raw_http import read_until_closed, status_line
from tracker_api.app import create_app
from tracker_api.web import logs
from tracker_api.web.config import AppConfig
from tracker_core.admin import project_verbs

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
    project_verbs.create(admin, "proj")
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
    project_verbs.create(admin, "proj")
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
    client.simulate_post("/api/register.json", body="{}", headers={"X-Forwarded-For": "1.2.3.45.6.7.8"})
    # Never the header's text (a client wrote it) nor the peer as if it were the client.
    assert [(status, ip) for _, _, status, _, ip in access_lines()] == [
        ("200", "203.0.113.7"),
        ("200", "unreadable-forwarded-for@127.0.0.1"),  # the front page reads no address
        ("400", "unreadable-forwarded-for@127.0.0.1"),
    ]


# Backfeed paths in every shape a client can send (each routes to the backfeed endpoint or to a
# 404 that still carries what the client typed): the log keeps the shape, never the secret.
BACKFEED_SHAPES = {
    f"/backfeed/legacy/{SECRET}": "/backfeed/legacy/***",  # no dash: all of it is the secret
    f"/backfeed/legacy/proj-{SECRET}": "/backfeed/legacy/proj-***",
    f"/backfeed/legacy/my-proj-{SECRET}": "/backfeed/legacy/my-proj-***",
    f"/BACKFEED/LEGACY/proj-{SECRET}": "/BACKFEED/LEGACY/proj-***",
    f"//backfeed//legacy//proj-{SECRET}": "/backfeed/legacy/proj-***",  # collapsed as routed
    f"/backfeed/legacy/proj-{SECRET}/": "/backfeed/legacy/proj-***",
    f"/backfeed/legacy/proj-{SECRET}/more/proj-{SECRET}": "/backfeed/legacy/proj-***",
    f"/backfeed/{SECRET}": "/backfeed/***",
    f"/backfeed/other/proj-{SECRET}": "/backfeed/***",
    # The server decodes the path once (as Falcon's test client does): a space, a "%" left in it.
    f"/backfeed/legacy/proj-{SECRET[:10]}%20{SECRET[10:]}": "/backfeed/legacy/proj-***",
    f"/backfeed/legacy/proj-{SECRET[:4]}%25{SECRET[4:]}": "/backfeed/legacy/proj-***",
    f"/backfeed%2Flegacy%2Fproj%2D{SECRET}": "/backfeed/legacy/proj-***",
    f"/%62ackfeed/legacy/proj-{SECRET}": "/backfeed/legacy/proj-***",
    f"/%2562ackfeed%252Flegacy/proj-{SECRET}": "/backfeed/legacy/proj-***",  # decoded here again
    f"/tracker/backfeed/legacy/proj-{SECRET}": "/tracker/backfeed/legacy/proj-***",
}


@pytest.mark.parametrize("path", sorted(BACKFEED_SHAPES))
def test_a_backfeed_secret_is_masked_whatever_the_path_s_shape(engine, admin, access_lines, path):
    project_verbs.create(admin, "proj")
    client = testing.TestClient(create_app(engine))
    client.simulate_post(path, body="item\n", query_string=f"delimiter=%0A&x={SECRET}")
    text = access_lines.text()
    ((method, shown, status, _, _),) = [LINE.search(line).groups() for line in text.splitlines()]
    assert (method, status) in {("POST", "403"), ("POST", "404")}
    assert shown == BACKFEED_SHAPES[path]
    for piece in (SECRET, SECRET[:8], SECRET[-8:]):
        assert piece not in text


def test_what_holds_no_secret_is_logged_as_it_is(engine, admin, access_lines):
    project_verbs.create(admin, "proj")
    client = testing.TestClient(create_app(engine))
    paths = [
        "/api/admin/projects/proj/queues/backfeed/items",
        "/admin/proj/backfeed",
        "/proj/items/100%25.json",
    ]
    for path in paths:
        client.simulate_get(path)
    assert [shown for _, shown, *_ in access_lines()] == [
        "/api/admin/projects/proj/queues/backfeed/items",
        "/admin/proj/backfeed",
        "/proj/items/100%.json",  # a "%" left by the decoding is not decoded again
    ]


def test_neither_the_authorization_header_nor_a_token_in_the_query_is_logged(engine, admin, access_lines):
    from tracker_core.access import tokens

    token = tokens.create(admin.conn, "*")[0]
    client = testing.TestClient(create_app(engine))
    client.simulate_get("/api/admin/projects", headers={"Authorization": f"Bearer {token}"})
    client.simulate_get(
        "/metrics", query_string=f"token={token}", headers={"Authorization": "Basic dXNlcjpwYXNz"}
    )
    text = access_lines.text()
    assert len(access_lines()) == 2
    # The secret is everything after "trk_ID_" (token_urlsafe may hold "_" itself: a split at the
    # last "_" could leave one letter, found in "GET").
    secret = token.split("_", 2)[2]
    assert token not in text and secret not in text and "dXNlcjpwYXNz" not in text


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


def test_the_real_server_logs_no_backfeed_secret_whatever_the_raw_path(redis_url, admin):
    """The same through bjoern, whose own decoding of the request line decides what the app sees."""
    project_verbs.create(admin, "proj")
    raw_paths = [
        f"/backfeed/legacy/{SECRET}",
        f"/BACKFEED//legacy/proj-{SECRET}?x={SECRET}",
        f"/backfeed%2Flegacy%2Fproj%2d{SECRET}",
        f"/%2562ackfeed/legacy/proj-{SECRET}",
        f"/backfeed/legacy/proj-{SECRET[:6]}%20{SECRET[6:]}",
        f"/backfeed/legacy/proj-{SECRET[:6]}%0A{SECRET[6:]}",
    ]
    process, port = start_serve(redis_url, "--host", "127.0.0.1", "--access-log", capture=True)
    try:
        for path in raw_paths:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 5\r\n\r\nitem\n".encode()
                )
                assert status_line(read_until_closed(sock, 10)[0]).split()[1] in (b"403", b"404")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /end-of-test HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            read_until_closed(sock, 10)
        wait_for_line(process, r"tracker\.access: GET /end-of-test 404 ")
    finally:
        stop(process)
    access = [line for line in process.lines if "tracker.access: POST " in line]
    assert len(access) == len(raw_paths), process.lines
    for piece in (SECRET, SECRET[:10], SECRET[6:], SECRET[-8:]):
        assert not any(piece in line for line in process.lines), piece
