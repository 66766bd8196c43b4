"""Nodes whose clocks are hours off, beside a correct one, on one Redis (docs/operations.md, Clocks).

Each node is a real `tracker serve` whose process clock libfaketime moves (support.clock_skew).
Times in scripts are Redis's, so a skewed node neither hands out another node's claims, nor
makes its own reclaimable at once, nor writes statistics into another minute; past
--max-clock-offset it refuses to serve and says why.
"""

from __future__ import annotations

import json
import socket

import orjson
import pytest

from chaos.procs import skewed_env
from support.processes import start_serve, stop
from support.projects import new_project
from support.raw_http import read_until_closed
from tracker_core.keyspace import ProjectKeys

pytestmark = pytest.mark.slow

P = "skew"
K = ProjectKeys(P)
SEVEN_HOURS_S = 7 * 3600
# URL items, as the biggest projects hand out.
NAMES = [f"https://example.org/user/{i}?page=1&q=a%20b#frag {i}" for i in range(200)]


def http(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    data = orjson.dumps(body) if body is not None else b""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head.encode() + data)
        raw = read_until_closed(sock, 20)[0]
    head_bytes, _, payload = raw.partition(b"\r\n\r\n")
    return int(head_bytes.split(b" ", 2)[1]), payload


def claim(port: int, downloader: str, n: int) -> tuple[int, list[str]]:
    status, body = http(
        port,
        "POST",
        f"/{P}/multi={n}/request",
        {"downloader": downloader, "api_version": "2", "version": "20240101.01"},
    )
    return status, (orjson.loads(body)["item_name"].split("\0") if status == 200 else [body.decode()])


@pytest.fixture
def project(admin):
    return new_project(admin, P, NAMES, settings={"reclaim_ttl_s": "300"})


@pytest.fixture
def nodes(redis_url):
    started = []

    def start(offset: str | None = None, *options: str) -> int:
        env = skewed_env(offset) if offset else None
        process, port = start_serve(redis_url, *options, env=env)
        started.append(process)
        return port

    yield start
    for process in started:
        stop(process)


def redis_minute(r) -> int:
    seconds, _ = r.time()
    return seconds // 60


def minutes_written(r) -> set[int]:
    return {int(key.rsplit(":", 1)[1]) for key in r.scan_iter(f"{K.tag}:minute:*")}


def health(port: int) -> tuple[int, dict]:
    status, body = http(port, "GET", "/healthz")
    return status, json.loads(body)


@pytest.mark.parametrize("offset", ["+7h", "-7h"])
def test_a_node_hours_off_neither_takes_nor_exposes_another_nodes_claims(project, nodes, r, offset):
    correct = nodes()
    skewed = nodes(offset, "--max-clock-offset", "0")  # no bound: it serves on Redis's time
    status, body = health(skewed)
    assert status == 200 and body["ok"], body
    assert abs(abs(body["clock"]["offset_s"]) - SEVEN_HOURS_S) < 60, body
    assert (body["clock"]["offset_s"] > 0) == (offset[0] == "+")

    # Claims made on one node are out of reach of the other, whichever claims first.
    status, first = claim(correct, "alice", 50)
    assert status == 200 and len(first) == 50
    status, second = claim(skewed, "bob", 50)
    assert status == 200 and len(second) == 50
    status, third = claim(correct, "carol", 50)
    assert status == 200 and len(third) == 50
    assert not set(first) & set(second) and not set(second) & set(third) and not set(first) & set(third)
    stats = r.hgetall(K.stats)
    assert int(stats.get("reclaims_served", 0)) == 0, stats
    assert int(stats["items_claimed"]) == 150
    assert r.zcard(K.out) == 150

    # Every minute bucket the claims wrote is Redis's minute, not one 420 minutes away.
    now = redis_minute(r)
    written = minutes_written(r)
    assert written and all(now - 1 <= m <= now for m in written), (now, written)


def test_a_node_past_the_bound_refuses_to_serve_and_says_why(project, nodes, r, admin):
    skewed = nodes("+7h")  # the default bound: 60 s
    status, body = health(skewed)
    assert status == 503 and not body["ok"]
    assert "clock" in body["reason"] and "--max-clock-offset" in body["reason"]
    assert body["clock"]["refusal"] == body["reason"]

    before = (r.zcard(K.out), r.hgetall(K.stats))
    status, reason = claim(skewed, "bob", 5)
    assert status == 503 and "clock" in reason[0]
    status, text = http(
        skewed,
        "POST",
        f"/{P}/done",
        {"downloader": "bob", "version": "1", "item": NAMES[0], "bytes": {}, "id": {}},
    )
    assert status == 503 and b"clock" in text
    assert (r.zcard(K.out), r.hgetall(K.stats)) == before  # nothing changed, nothing counted

    # A correct node beside it serves, and the metrics say which node refuses.
    correct = nodes()
    assert health(correct)[0] == 200
    assert claim(correct, "alice", 5)[0] == 200
    status, metrics = http(skewed, "GET", "/metrics")
    text = metrics.decode()
    assert "tracker_clock_refusing 1.0" in text
    offset_line = next(line for line in text.splitlines() if line.startswith("tracker_clock_offset_seconds"))
    assert float(offset_line.split()[1]) > SEVEN_HOURS_S - 60


def test_a_node_within_the_bound_serves_on_redis_time(project, nodes, r):
    skewed = nodes("+30s")
    status, body = health(skewed)
    assert status == 200 and 25 < body["clock"]["offset_s"] < 35, body
    status, names = claim(skewed, "bob", 3)
    assert status == 200
    # The claim time recorded is Redis's (within a few seconds), not 30 s ahead.
    seconds, _ = r.time()
    record = r.hget(K.claims, names[0])
    assert record is not None
    assert abs(int(record.rsplit("\t", 1)[1]) / 1000 - seconds) < 5, record
