"""The client IP behind a trusted proxy: the address the proxy appended, never one a client sent.

A client that sends its own X-Forwarded-For or Forwarded must not choose the IP the tracker
sees: blocks, claims, unique counts and the warrior registry all use the one in client_ip.py.
"""

import json
import os
import socket

import orjson
import pytest
from falcon import testing

from support.processes import start_serve, stop, wait_for_line
from support.projects import new_project
from support.state import snapshot
from tracker_api.app import create_app
from tracker_api.web.client_ip import FIELD, Unreadable, from_forwarded_for, normalize, throttle_key
from tracker_api.web.config import AppConfig
from tracker_core import keyspace
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P = "proj"
K = ProjectKeys(P)
REAL = "203.0.113.7"  # the address HAProxy saw and appended
PROXY = "10.0.0.5"  # the load balancer: the socket's peer
ITEMS = [f"https://example.com/a b/{n}?q=%20#frag" for n in range(10)]


@pytest.fixture
def project(admin):
    return new_project(admin, P, ITEMS)


def request(web, headers, remote_addr=PROXY):
    return web.simulate_post(
        f"/{P}/request",
        body=orjson.dumps({"downloader": "alice", "api_version": "2"}),
        remote_addr=remote_addr,
        headers={"Content-Type": "application/json", **headers},
    )


SPOOFS = [
    {"X-Forwarded-For": f"10.9.9.9, {REAL}"},  # prepended by the client
    {"X-Forwarded-For": f"10.9.9.9,{REAL}"},
    {"X-Forwarded-For": REAL, "Forwarded": "for=10.9.9.9"},  # Forwarded beside it
    {"X-Forwarded-For": f"::ffff:10.9.9.9, {REAL}", "Forwarded": 'for="[::1]"'},
]


@pytest.mark.parametrize("headers", SPOOFS)
def test_a_spoofed_forwarded_for_does_not_bypass_an_ip_block(engine, admin, project, r, headers):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    limit_verbs.block(admin, f"ip:{REAL}", P)
    res = request(web, headers)
    assert res.status_code == 403 and res.content == b""
    assert r.hlen(K.claims) == 0


@pytest.mark.parametrize("headers", SPOOFS)
def test_claims_record_the_address_the_proxy_appended(engine, project, r, headers):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    res = request(web, headers)
    assert res.status_code == 200
    (claim,) = r.hvals(K.claims)
    assert claim.split("\t")[1] == REAL


def test_two_trusted_proxies_take_the_second_entry_from_the_right(engine, project, r, admin):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=2)))
    limit_verbs.block(admin, f"ip:{REAL}", P)
    # client-sent, what the CDN saw, what HAProxy saw (the CDN)
    assert request(web, {"X-Forwarded-For": f"10.9.9.9, {REAL}, 198.51.100.1"}).status_code == 403
    limit_verbs.block(admin, f"ip:{REAL}", P, remove=True)
    assert request(web, {"X-Forwarded-For": f"10.9.9.9, {REAL}, 198.51.100.1"}).status_code == 200
    assert r.hvals(K.claims)[0].split("\t")[1] == REAL


def test_without_trust_the_headers_are_ignored(engine, project, r):
    web = testing.TestClient(create_app(engine))
    assert request(web, {"X-Forwarded-For": REAL, "Forwarded": f"for={REAL}"}).status_code == 200
    assert r.hvals(K.claims)[0].split("\t")[1] == PROXY


# What a trusted proxy never hands over: each is refused, never served as the socket's peer.
UNREADABLE = [
    {"X-Forwarded-For": f"{REAL}, not-an-ip" + "x" * 5000},
    {"X-Forwarded-For": "198.51.100.1203.0.113.7"},  # two lines as bjoern joins them
    {"X-Forwarded-For": f"6.6.6.6:{REAL}"},  # a client's "6.6.6.6:" glued to the proxy's line
    {"X-Forwarded-For": f"{REAL}, "},
    {"X-Forwarded-For": ""},
    {},  # absent: the request did not come through the proxy
]


@pytest.mark.parametrize(
    "headers", UNREADABLE, ids=["garbage", "joined", "glued-port", "empty-entry", "empty", "absent"]
)
def test_an_unreadable_forwarded_for_is_refused_counted_and_changes_nothing(engine, project, r, headers):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    before = snapshot(r)
    res = request(web, headers)
    assert res.status_code == 400
    assert res.text.count("\n") == 1 and "X-Forwarded-For" in res.text
    assert r.hget(K.stats, FIELD) == "1"
    assert snapshot(r) == before and r.hlen(K.claims) == 0


def test_a_done_with_an_unreadable_forwarded_for_is_refused_before_it_counts(engine, project, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    assert request(web, {"X-Forwarded-For": REAL}).status_code == 200
    (name,) = r.hkeys(K.claims)
    before = snapshot(r)
    for path in (f"/{P}/done", f"/{P}/done+request"):
        res = web.simulate_post(
            path,
            body=orjson.dumps({"downloader": "alice", "item": name, "bytes": {}}),
            remote_addr=PROXY,
            headers={"Content-Type": "application/json", "X-Forwarded-For": f"{REAL}{REAL}"},
        )
        assert res.status_code == 400, res.text
    assert snapshot(r) == before and r.hget(K.stats, FIELD) == "2"


def test_an_unknown_project_is_counted_globally(engine, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    res = web.simulate_post(
        "/nope/done",
        body=orjson.dumps({"downloader": "alice", "item": "a"}),
        remote_addr=PROXY,
        headers={"Content-Type": "application/json", "X-Forwarded-For": "junk"},
    )
    assert res.status_code == 400
    assert r.hget(keyspace.GLOBAL_STATS, FIELD) == "1" and not r.exists(K.stats)


@pytest.mark.parametrize("path", ["/api/register.json", "/api/update.json"])
def test_the_registry_refuses_an_unreadable_forwarded_for(engine, r, path):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    warrior_id = "0" * 32
    res = web.simulate_post(
        path,
        body=orjson.dumps({"warrior": {"version": "1", "warrior_id": warrior_id}}),
        remote_addr=PROXY,
        headers={"Content-Type": "application/json", "X-Forwarded-For": "10.9.9.9 203.0.113.7"},
    )
    assert res.status_code == 400 and res.text.count("\n") == 1
    assert r.hget(keyspace.GLOBAL_STATS, FIELD) == "1"
    assert r.hlen(keyspace.WARRIORS) == 0


def test_routes_that_do_not_read_the_address_still_answer(engine, project, r):
    # Nothing of the address is used there, so nothing is refused: the front page, stats.json.
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    headers = {"X-Forwarded-For": "junk"}
    assert web.simulate_get(f"/{P}/stats.json", headers=headers, remote_addr=PROXY).status_code == 200
    assert web.simulate_get("/", headers=headers, remote_addr=PROXY).status_code == 200
    assert r.hget(K.stats, FIELD) is None and r.hget(keyspace.GLOBAL_STATS, FIELD) is None


def test_without_trust_an_unreadable_header_is_no_matter(engine, project, r):
    web = testing.TestClient(create_app(engine))
    assert request(web, {"X-Forwarded-For": "junk"}).status_code == 200
    assert r.hvals(K.claims)[0].split("\t")[1] == PROXY


def test_the_registry_records_the_proxied_address(engine, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    res = web.simulate_post(
        "/api/register.json",
        body=orjson.dumps({"warrior": {"version": "1"}}),
        remote_addr=PROXY,
        headers={
            "Content-Type": "application/json",
            "X-Forwarded-For": f"10.9.9.9, {REAL}",
            "Forwarded": "for=10.9.9.8",
        },
    )
    record = json.loads(r.hget(keyspace.WARRIORS, res.json["warrior_id"]))
    assert record["ip"] == REAL


@pytest.mark.parametrize(
    "header,proxies,expected",
    [
        (REAL, 1, REAL),
        (f"1.1.1.1, 2.2.2.2, {REAL}", 1, REAL),
        (f"1.1.1.1, {REAL}, 2.2.2.2", 2, REAL),
        (REAL, 3, REAL),  # fewer hops than proxies: the left-most
        ("1.1.1.1, [2001:db8::1]:4711", 1, "2001:db8::1"),
        (f"1.1.1.1, {REAL}:4711", 1, REAL),
        ("1.1.1.1, ::FFFF:203.0.113.7", 1, REAL),  # one spelling, so blocks match
        (f" , ,{REAL}", 1, REAL),  # what the client wrote left of the proxies' entries is not read
        (f"junk, {REAL}, 198.51.100.1", 2, REAL),
        (f"[{REAL}]", 1, REAL),
        (f"1.1.1.1, {REAL}:65535", 1, REAL),
        ("9" * 20000 + f", {REAL}", 1, REAL),  # a huge header: only its tail is read
        ("9" * 20000 + f", {REAL}, 198.51.100.1", 2, REAL),
    ],
)
def test_forwarded_for_parsing(header, proxies, expected):
    assert from_forwarded_for(header, proxies) == expected


@pytest.mark.parametrize(
    "header,proxies,why",
    [
        (None, 1, "no X-Forwarded-For"),
        ("", 1, "entry 1 from the right is empty"),
        ("   ", 1, "entry 1 from the right is empty"),
        ("1.1.1.1, ", 1, "entry 1 from the right is empty"),
        ("1.1.1.1,", 1, "entry 1 from the right is empty"),
        ("1.1.1.1, unknown", 1, "entry 1 from the right is not an IP address"),
        ("198.51.100.1203.0.113.9", 1, "not an IP address"),  # bjoern's join of two lines
        ("10.9.9.9" + REAL, 1, "not an IP address"),
        (f"10.9.9.9, {REAL}" + "198.51.100.1", 1, "not an IP address"),
        ("2001:db8::12001:db8::2", 1, "not an IP address"),
        (f"6.6.6.6:{REAL}", 1, "not an IP address"),  # a port is digits, never an address
        ("[6.6.6.6]:2001:db8::1", 1, "not an IP address"),
        ("[2001:db8::1]x", 1, "not an IP address"),
        ("[2001:db8::1", 1, "not an IP address"),
        (f"{REAL}:", 1, "not an IP address"),
        (f"{REAL}:123456", 1, "not an IP address"),
        (f"{REAL}:٤٤", 1, "not an IP address"),  # digits, but not ASCII ones
        ("fe80::1%eth0", 1, "not an IP address"),  # a zone: no block on fe80::1 would match it
        (f"{REAL} 10.9.9.9", 1, "not an IP address"),
        (f"10.9.9.9, unknown, {REAL}", 2, "entry 2 from the right is not an IP address"),
        (f"10.9.9.9, {REAL}, unknown", 2, "entry 1 from the right is not an IP address"),
        (f", {REAL}", 2, "entry 2 from the right is empty"),
        ("x" * 9000, 1, "longer than 8192 characters"),  # one entry, cut: nothing to read
        ("9" * 20000 + f", {REAL}", 2, "without 2 entries at its end"),
        (f"{REAL}, " + "x" * 9000, 1, "longer than 8192 characters"),
    ],
)
def test_an_unreadable_forwarded_for_says_why(header, proxies, why):
    with pytest.raises(Unreadable) as raised:
        from_forwarded_for(header, proxies)
    assert why in str(raised.value) and "\n" not in str(raised.value)


def test_normalize_drops_only_what_a_proxy_writes():
    assert normalize(f"{REAL}:0") == REAL and normalize("[::1]:80") == "::1"
    for text in (f"{REAL}:", f"{REAL}:x", "[::1]:", "[::1]:80:80", "::1%1", "[fe80::1%eth0]", "1.2.3.4:5:6"):
        assert normalize(text) is None, text


def test_normalize_and_throttle_key():
    assert normalize(" 2001:DB8:0::1 ") == "2001:db8::1" and normalize("x") is None
    assert throttle_key("2001:db8:1:2:3:4:5:6") == throttle_key("2001:db8:1:2:ffff::1")
    assert throttle_key("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert throttle_key(REAL) == REAL


def _raw(port, head: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                return b"".join(chunks)
            chunks.append(data)


def test_live_server_with_trusted_proxies_from_the_environment(redis_url, admin, r):
    """`tracker serve --trust-forwarded` with TRACKER_TRUSTED_PROXIES=2, through bjoern.

    bjoern glues a repeated header's lines with no separator ("a, b" + "c" is "a, bc"), so the
    proxies must hand over one line: HAProxy drops what the client sent (test below).
    """
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    limit_verbs.block(admin, f"ip:{REAL}", P)
    env = dict(os.environ, TRACKER_TRUSTED_PROXIES="2")
    process, port = start_serve(redis_url, "--host", "127.0.0.1", "--trust-forwarded", env=env)
    try:
        body = b'{"downloader": "alice", "api_version": "2"}'
        head = (
            f"POST /{P}/request HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            "Content-Type: application/json\r\n"
            f"X-Forwarded-For: 10.9.9.9, {REAL}, 198.51.100.1\r\n"
            f"Forwarded: for=10.9.9.9\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        answer = _raw(port, head + body.decode())
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
        assert r.hlen(K.claims) == 0
    finally:
        stop(process)


def test_haproxy_drops_client_sent_forwarding_headers_before_adding_its_own():
    from support.paths import ROOT

    cfg = (ROOT / "ansible/roles/loadbalancer/templates/haproxy.cfg.j2").read_text()
    frontend = cfg[cfg.index("frontend warriors") : cfg.index("\nbackend ")]
    assert "http-request del-header X-Forwarded-For" in frontend
    assert "http-request del-header Forwarded" in frontend
    assert "option forwardfor" in frontend


def _post(port, path: str, body: dict, forwarded: list[str]) -> tuple[bytes, bytes]:
    """POST BODY to PATH with one X-Forwarded-For line per entry of FORWARDED, over a raw
    socket (an HTTP client library would merge repeated headers itself): (status line, body)."""
    data = orjson.dumps(body)
    lines = "".join(f"X-Forwarded-For: {value}\r\n" for value in forwarded)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        f"{lines}Content-Length: {len(data)}\r\n\r\n"
    )
    answer = _raw(port, head + data.decode())
    status, _, rest = answer.partition(b"\r\n")
    return status, rest.partition(b"\r\n\r\n")[2]


def test_two_forwarded_for_lines_through_bjoern_are_refused_not_served_as_the_proxy(redis_url, admin, r):
    """A blocked client sends its own X-Forwarded-For beside the proxy's (HAProxy with `option
    forwardfor` alone adds a second line): bjoern hands the app "198.51.100.1203.0.113.7", which
    used to fall back to the socket's peer, the proxy, and got the blocked client served."""
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    limit_verbs.block(admin, f"ip:{REAL}", P)
    process, port = start_serve(
        redis_url, "--host", "127.0.0.1", "--trust-forwarded", "--access-log", capture=True
    )
    request_body = {"downloader": "alice", "api_version": "2"}
    try:
        # One line: the proxy's, read as the blocked client.
        assert _post(port, f"/{P}/request", request_body, [REAL])[0] == b"HTTP/1.1 403 Forbidden"
        before = snapshot(r)
        status, body = _post(port, f"/{P}/request", request_body, ["198.51.100.1", REAL])
        assert status == b"HTTP/1.1 400 Bad Request", (status, body)
        assert body.count(b"\n") == 1 and b"X-Forwarded-For" in body
        assert snapshot(r) == before and r.hlen(K.claims) == 0
        assert r.hget(K.stats, FIELD) == "1"
        # A client that is not blocked is served, and a done of its claim sent with two lines
        # is refused (the hot path's done) and changes nothing either.
        assert _post(port, f"/{P}/request", request_body, ["198.51.100.1"])[0] == b"HTTP/1.1 200 OK"
        (name,) = r.hkeys(K.claims)
        before = snapshot(r)
        done = {"downloader": "alice", "item": name, "bytes": {}}
        status, _ = _post(port, f"/{P}/done", done, ["198.51.100.1", "198.51.100.1"])
        assert status == b"HTTP/1.1 400 Bad Request"
        assert snapshot(r) == before and r.hget(K.stats, FIELD) == "2"
        wait_for_line(process, rf"POST /{P}/done 400 \S+ unreadable-forwarded-for@127\.0\.0\.1$")
    finally:
        stop(process)


def test_a_non_address_at_the_trusted_position_through_bjoern_is_refused(redis_url, admin, r):
    """--trusted-proxies 2: the entry the outer proxy wrote (second from the right) must be an
    address; "unknown" there used to make the inner proxy, the socket's peer, the client."""
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    process, port = start_serve(
        redis_url, "--host", "127.0.0.1", "--trust-forwarded", "--trusted-proxies", "2"
    )
    request_body = {"downloader": "alice", "api_version": "2"}
    try:
        before = snapshot(r)
        status, _ = _post(port, f"/{P}/request", request_body, ["10.9.9.9, unknown, 198.51.100.1"])
        assert status == b"HTTP/1.1 400 Bad Request"
        assert snapshot(r) == before and r.hget(K.stats, FIELD) == "1"
        status, _ = _post(port, f"/{P}/request", request_body, [f"10.9.9.9, {REAL}, 198.51.100.1"])
        assert status == b"HTTP/1.1 200 OK"
        assert r.hvals(K.claims)[0].split("\t")[1] == REAL
    finally:
        stop(process)
