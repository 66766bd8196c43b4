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

from support.processes import start_serve, stop
from tracker_api.app import create_app
from tracker_api.client_ip import from_forwarded_for, normalize, throttle_key
from tracker_api.config import AppConfig
from tracker_core import keys as keyspace
from tracker_core.admin import items, limits, projects
from tracker_core.keys import ProjectKeys

P = "proj"
K = ProjectKeys(P)
REAL = "203.0.113.7"  # the address HAProxy saw and appended
PROXY = "10.0.0.5"  # the load balancer: the socket's peer
ITEMS = [f"https://example.com/a b/{n}?q=%20#frag" for n in range(10)]


@pytest.fixture
def project(admin):
    projects.create(admin, P)
    items.add(admin, P, ITEMS)
    return P


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
    limits.block(admin, f"ip:{REAL}", P)
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
    limits.block(admin, f"ip:{REAL}", P)
    # client-sent, what the CDN saw, what HAProxy saw (the CDN)
    assert request(web, {"X-Forwarded-For": f"10.9.9.9, {REAL}, 198.51.100.1"}).status_code == 403
    limits.block(admin, f"ip:{REAL}", P, remove=True)
    assert request(web, {"X-Forwarded-For": f"10.9.9.9, {REAL}, 198.51.100.1"}).status_code == 200
    assert r.hvals(K.claims)[0].split("\t")[1] == REAL


def test_without_trust_the_headers_are_ignored(engine, project, r):
    web = testing.TestClient(create_app(engine))
    assert request(web, {"X-Forwarded-For": REAL, "Forwarded": f"for={REAL}"}).status_code == 200
    assert r.hvals(K.claims)[0].split("\t")[1] == PROXY


def test_a_garbage_hop_falls_back_to_the_peer(engine, project, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    assert request(web, {"X-Forwarded-For": f"{REAL}, not-an-ip" + "x" * 5000}).status_code == 200
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
        ("1.1.1.1, unknown", 1, None),
        ("1.1.1.1, ", 1, None),
        ("9" * 20000 + f", {REAL}", 1, REAL),  # a huge header: only its tail is read
    ],
)
def test_forwarded_for_parsing(header, proxies, expected):
    assert from_forwarded_for(header, proxies) == expected


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
    projects.create(admin, P)
    items.add(admin, P, ITEMS)
    limits.block(admin, f"ip:{REAL}", P)
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
