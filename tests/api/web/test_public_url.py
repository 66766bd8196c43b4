"""projects.json (and the same document in /api/update.json) builds its leaderboard URLs from the
configured public URL, else from a Host header only when it is a plain host[:port], else relative
ones; a forged Host puts nothing of its own in the document. projects.json says how long it may be
cached. `tracker serve`/`run --public-url` (TRACKER_PUBLIC_URL) is checked at start."""

from __future__ import annotations

import os

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from support.processes import ServerProcess
from support.projects import new_project
from support.raw_http import read_until_closed, status_line
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_api.warrior_api import hq_routes
from tracker_api.web import public_url
from tracker_api.web.config import AppConfig
from tracker_core.admin import project_verbs

P = "shown"
PUBLIC = "https://tracker.example.org"

GOOD_HOSTS = [
    ("tracker.example.org", "http://tracker.example.org"),
    ("tracker.example.org:8080", "http://tracker.example.org:8080"),
    ("127.0.0.1:80", "http://127.0.0.1:80"),
    ("[2001:db8::1]:443", "http://[2001:db8::1]:443"),
    ("localhost", "http://localhost"),
]
# Each holds "evil" so that the test can tell none of it reached the document.
FORGED_HOSTS = [
    "evil.example/phish",  # a path
    "evil.example:80@x",
    "user@evil.example",
    'evil.example"><script>alert(1)</script>',
    "evil.example:99999",  # no such port
    "evil.example:",
    "evil.example:80:80",
    "-evil.example",
    "evil..example",
    "evil.example?x=1",
    "evil.example#x",
    "[::1%evil]",
    "[evil]",
    "evil." + "x" * 300,
    "évil.example",
    "evil.example\\x",
]


@pytest.mark.parametrize("host,base", GOOD_HOSTS)
def test_a_plain_host_is_a_base(host, base):
    assert public_url.valid_host(host)
    assert public_url.base_url("", "http", host) == base


# HTTP strips the blanks around a header's value before the app sees it: a unit case only.
@pytest.mark.parametrize("host", [*FORGED_HOSTS, "evil.example ", " evil.example", ""])
def test_anything_else_gives_relative_links(host):
    assert not public_url.valid_host(host)
    assert public_url.base_url("", "http", host) == ""


def test_no_host_gives_relative_links_and_a_configured_url_wins_over_any():
    assert public_url.base_url("", "http", None) == ""
    assert public_url.base_url(PUBLIC, "http", "evil.example") == PUBLIC


@pytest.mark.parametrize(
    "given,kept",
    [
        ("https://tracker.example.org", "https://tracker.example.org"),
        ("https://tracker.example.org/", "https://tracker.example.org"),
        ("http://tracker.example.org:8080/at/", "http://tracker.example.org:8080/at"),
        ("  https://[2001:db8::1]  ", "https://[2001:db8::1]"),
        ("", ""),
    ],
)
def test_a_public_url_is_kept_without_its_trailing_slash(given, kept):
    assert public_url.validate(given) == kept


@pytest.mark.parametrize(
    "given,reason",
    [
        ("tracker.example.org", "http:// or https://"),
        ("javascript:alert(1)", "http:// or https://"),
        ("ftp://tracker.example.org", "http:// or https://"),
        ("https://", "not a host"),
        ("https://user:pw@tracker.example.org", "user"),
        ("https://tracker.example.org/?x=1", "query"),
        ("https://tracker.example.org/?", "query"),
        ("https://tracker.example.org/#top", "fragment"),
        ("https://tracker.example.org:0", "not a host"),
        ("https://exa\tmple.org", "printable"),
        ("https://tracker.example.org/a b", "printable"),
        ('https://tracker.example.org/"><script>', "quotes"),
        ("https://[::1", "not a URL"),
    ],
)
def test_a_bad_public_url_is_refused_with_a_reason(given, reason):
    with pytest.raises(ValueError, match=reason) as refused:
        public_url.validate(given)
    assert "\n" not in str(refused.value)


# -- the documents --------------------------------------------------------------------------------


@pytest.fixture
def listed(admin):
    return new_project(admin, P)


def web(engine, public: str = "") -> testing.TestClient:
    return testing.TestClient(create_app(engine, config=AppConfig(public_url=public)))


def projects_json(client, host: str):
    return client.simulate_get("/projects.json", headers={"Host": host})


def update_json(client, host: str):
    body = orjson.dumps({"warrior": {"warrior_id": "0" * 32}})
    return client.simulate_post("/api/update.json", body=body, headers={"Host": host})


def leaderboard(res) -> str:
    assert res.status_code == 200
    (entry,) = res.json["projects"]
    return entry["leaderboard"]


@pytest.mark.usefixtures("listed")
@pytest.mark.parametrize("fetch", [projects_json, update_json], ids=["projects.json", "update.json"])
@pytest.mark.parametrize("host", FORGED_HOSTS)
def test_a_forged_host_puts_nothing_in_the_document(engine, fetch, host):
    res = fetch(web(engine), host)
    assert leaderboard(res) == f"/{P}/"
    assert "evil" not in res.text


@pytest.mark.usefixtures("listed")
@pytest.mark.parametrize("fetch", [projects_json, update_json], ids=["projects.json", "update.json"])
def test_a_plain_host_is_used_when_no_url_is_configured(engine, fetch):
    assert (
        leaderboard(fetch(web(engine), "tracker.example.net:8080")) == f"http://tracker.example.net:8080/{P}/"
    )


@pytest.mark.usefixtures("listed")
@pytest.mark.parametrize("fetch", [projects_json, update_json], ids=["projects.json", "update.json"])
@pytest.mark.parametrize("host", ["evil.example", "tracker.example.org:8080", *FORGED_HOSTS])
def test_with_a_public_url_the_host_header_is_never_read(engine, fetch, host):
    res = fetch(web(engine, PUBLIC), host)
    assert leaderboard(res) == f"{PUBLIC}/{P}/"
    assert "evil" not in res.text and ":8080" not in res.text


@pytest.mark.usefixtures("listed")
def test_projects_json_may_be_cached_a_minute_by_anyone(engine):
    res = projects_json(web(engine), "tracker.example.org")
    assert res.headers["Cache-Control"] == hq_routes.PROJECTS_CACHE_CONTROL == "public, max-age=60"


# -- the command line and a real server -----------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "run"])
def test_serve_and_run_refuse_a_bad_public_url_at_start_in_one_line(command, monkeypatch):
    monkeypatch.setenv("TRACKER_PUBLIC_URL", "https://tracker.example.org/?x=1")
    result = CliRunner().invoke(main, [command])
    assert result.exit_code == 2
    assert "Invalid value for '--public-url'" in result.output and "must not have a query" in result.output
    result = CliRunner().invoke(main, [command, "--public-url", "javascript:alert(1)"])
    assert result.exit_code == 2 and "must start with http:// or https://" in result.output


@pytest.mark.parametrize("command", ["serve", "run"])
def test_serve_and_run_hand_the_public_url_to_the_workers(command, monkeypatch):
    monkeypatch.setenv("TRACKER_PUBLIC_URL", "https://tracker.example.org/")
    with main.make_context("tracker", [command]) as root:
        with main.commands[command].make_context(command, [], parent=root) as ctx:
            assert ctx.params["public_url"] == "https://tracker.example.org"


def test_a_real_server_with_a_public_url_ignores_a_forged_host(redis_url, admin):
    project_verbs.create(admin, P)
    server = ServerProcess(redis_url, "--public-url", PUBLIC + "/")
    try:
        with server.connect() as sock:
            sock.sendall(b"GET /projects.json HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
            answer, _ = read_until_closed(sock, 10)
    finally:
        server.stop()
    assert status_line(answer) == b"HTTP/1.1 200 OK"
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\ncache-control: public, max-age=60\r\n" in (head + b"\r\n").lower()
    assert orjson.loads(body)["projects"][0]["leaderboard"] == f"{PUBLIC}/{P}/"
    assert b"evil" not in answer
    assert os.environ.get("TRACKER_PUBLIC_URL") is None  # the option, not the environment
