"""Hostile HTTP against the real server process over raw loopback sockets (issue 12).

bjoern has no timeouts and buffers whole bodies; the worker's guard thread and body cap must
answer or close every connection within a bound and keep a worker's memory bounded.
"""

from __future__ import annotations

import json
import time

import pytest

from support.processes import ServerProcess as Server
from support.raw_http import read_until_closed, status_line

IDLE_S = 2.0
REQUEST_S = 3.0
# The guard scans every quarter of the shorter timeout: a close comes at most that late.
BOUND_S = 1.5


def proc_status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


@pytest.fixture
def server(redis_url):
    s = Server(
        redis_url,
        "--idle-timeout",
        str(IDLE_S),
        "--request-timeout",
        str(REQUEST_S),
        "--max-body-bytes",
        str(1 << 20),
    )
    yield s
    s.stop()


UPGRADE_WS = (
    b"GET /p/request HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
UPGRADE_H2C = (
    b"POST /p/request HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\n"
    b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
)


@pytest.mark.parametrize(
    "name,raw,expect",
    [
        ("websocket upgrade", UPGRADE_WS, b"HTTP/1.1 405"),
        ("h2c upgrade", UPGRADE_H2C, b"HTTP/1.1 "),
        ("HTTP/9.9", b"POST /p/request HTTP/9.9\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}", b"HTTP/1.1 "),
        (
            "Content-Length larger than the body",
            b"POST /p/done HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc",
            b"HTTP/1.1 408",
        ),
        ("a body of only CRLFs", b"\r\n" * 5000, b"HTTP/1.1 408"),
        ("a request line cut short", b"POST /p/request HTT", b"HTTP/1.1 408"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_malformed_request_is_answered_and_closed(server, name, raw, expect):
    with server.connect() as sock:
        sock.sendall(raw)
        answer, closed_after = read_until_closed(sock, max(IDLE_S, REQUEST_S) + BOUND_S + 2)
    assert closed_after is not None, f"{name}: still open, got {answer[:80]!r}"
    assert closed_after <= max(IDLE_S, REQUEST_S) + BOUND_S, name
    assert answer.startswith(expect), f"{name}: {answer[:80]!r}"


@pytest.mark.parametrize(
    "name,raw",
    [
        ("200 KB path", b"GET /" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: t\r\n\r\n"),
        ("1 MB header", b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_oversized_head_is_refused_at_once(server, name, raw):
    """bjoern's parser stops at 80 KB of head and answers 400 itself (no hook for 414/431):
    the answer comes at once and the connection is closed, never left open."""
    with server.connect() as sock:
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer, closed_after = read_until_closed(sock, 5)
    assert closed_after is not None and closed_after < 2, name
    assert answer == b"" or status_line(answer) == b"HTTP/1.1 400 Bad Request", answer[:80]
    assert b"200 OK" in server.get()


def test_idle_keepalive_connection_is_closed_after_the_timeout(server):
    with server.connect() as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        sock.settimeout(5)
        first = sock.recv(65536)
        assert status_line(first) == b"HTTP/1.1 200 OK"
        while b"\r\n\r\n" not in first:
            first += sock.recv(65536)
        head, _, body = first.partition(b"\r\n\r\n")
        length = int(
            [
                line.split(b":")[1]
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ][0]
        )
        while len(body) < length:
            body += sock.recv(65536)
        started = time.monotonic()
        rest, closed_after = read_until_closed(sock, IDLE_S + BOUND_S + 2)
    assert rest == b""
    assert closed_after is not None and IDLE_S - 0.5 <= closed_after <= IDLE_S + BOUND_S
    assert time.monotonic() - started < IDLE_S + BOUND_S + 1


def test_silent_connection_is_closed(server):
    with server.connect() as sock:
        answer, closed_after = read_until_closed(sock, IDLE_S + BOUND_S + 2)
    assert answer == b"" and closed_after is not None and closed_after <= IDLE_S + BOUND_S


def test_slowloris_drip_is_cut_at_the_request_timeout(server):
    """A byte every half second is never idle; the request as a whole must still time out."""
    with server.connect() as sock:
        started = time.monotonic()
        head = b"POST /p/request HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100
        answer, reset = b"", False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                reset = True
                break
            sock.settimeout(0.5)
            try:
                chunk = sock.recv(65536)
                answer += chunk
                if not chunk:
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                # The guard closes with a reset (so bjoern can never run what is queued); a
                # byte sent just before it can make the client's kernel drop the 408 it wrote.
                reset = True
                break
            if time.monotonic() - started > REQUEST_S + BOUND_S + 2:
                break
        elapsed = time.monotonic() - started
    assert status_line(answer) == b"HTTP/1.1 408 Request Timeout" or (reset and answer == b"")
    assert REQUEST_S - 0.5 <= elapsed <= REQUEST_S + BOUND_S + 0.6


def test_a_request_in_progress_is_not_cut(server):
    """A whole request sent just before the idle timeout is answered normally."""
    with server.connect() as sock:
        time.sleep(IDLE_S * 0.6)
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        answer, closed_after = read_until_closed(sock, 5)
    assert status_line(answer) == b"HTTP/1.1 200 OK"


def _post_huge(server, total_bytes: int, limit_s: float = 20.0):
    """POST TOTAL_BYTES of body as fast as the server takes them; return (answer, sent bytes)."""
    sock = server.connect(timeout_s=limit_s)
    chunk = b"x" * (1 << 20)
    sent = 0
    started = time.monotonic()
    try:
        sock.sendall(
            f"POST /p/done HTTP/1.1\r\nHost: t\r\nContent-Length: {total_bytes}\r\n"
            f"Content-Type: application/json\r\n\r\n".encode()
        )
        while sent < total_bytes and time.monotonic() - started < limit_s:
            sock.sendall(chunk)
            sent += len(chunk)
    except (TimeoutError, BrokenPipeError, ConnectionResetError):
        pass
    try:
        answer, _ = read_until_closed(sock, 5)
    except OSError:
        answer = b""
    sock.close()
    return answer, sent


def test_huge_body_is_capped_before_it_is_buffered(server):
    worker = server.workers[0]
    before_kb = proc_status(worker, "VmRSS")
    answer, sent = _post_huge(server, 256 << 20)
    peak_kb = proc_status(worker, "VmHWM")
    # 1 MB cap: the worker keeps at most the cap (plus a read buffer), never the 256 MB.
    assert peak_kb - before_kb < 24 * 1024, (before_kb, peak_kb, sent)
    assert answer == b"" or status_line(answer) == b"HTTP/1.1 413 Content Too Large", answer[:80]
    assert b"200 OK" in server.get()


def test_body_at_the_cap_still_reaches_the_app(server, admin):
    """Exactly at the cap: bjoern buffers it whole and the app answers (here: no such project)."""
    head = b'{"downloader": "x", "items": [], "pad": "'
    body = head + b"a" * ((1 << 20) - len(head) - 2) + b'"}'
    assert len(body) == 1 << 20
    with server.connect() as sock:
        sock.sendall(
            b"POST /p/done HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        answer, _ = read_until_closed(sock, 10)
    assert status_line(answer) != b"HTTP/1.1 413 Content Too Large"
    assert status_line(answer).startswith(b"HTTP/1.1 4")  # no such project: the app's own


def post_raw(server, path: str, body: bytes) -> tuple[bytes, float | None]:
    """POST BODY to PATH on one connection; what came back and when the server closed."""
    with server.connect() as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n".encode()
            + b"Content-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        return read_until_closed(sock, 10)


def test_body_just_past_the_cap_is_413(server):
    answer, closed_after = post_raw(server, "/p/done", b"a" * ((1 << 20) + 1))
    assert status_line(answer) == b"HTTP/1.1 413 Content Too Large"
    assert closed_after is not None


def test_backfeed_body_past_the_cap_is_a_json_413(server):
    # Grab scripts decode every backfeed answer as JSON and read status_code.
    answer, _ = post_raw(server, "/backfeed/legacy/p-secret", b"a" * ((1 << 20) + 1))
    assert status_line(answer) == b"HTTP/1.1 413 Content Too Large"
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert b"application/json" in head
    assert json.loads(payload)["status_code"] == 413


def test_a_client_still_sending_past_the_cap_is_cut_off(server):
    """A slow upload past the cap is reset by the guard, not read on to its claimed end."""
    with server.connect() as sock:
        sock.sendall(b"POST /p/done HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000000\r\n\r\n")
        sock.sendall(b"x" * (2 << 20))
        started = time.monotonic()
        cut = False
        while time.monotonic() - started < 10:
            try:
                sock.sendall(b"x" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            time.sleep(0.05)
    assert cut and time.monotonic() - started < 3 * BOUND_S


def test_connect_is_answered_4xx_not_500(server):
    # CONNECT carries an authority, not a path: bjoern gives the app no PATH_INFO.
    with server.connect() as sock:
        sock.sendall(
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n"
        )
        answer, _ = read_until_closed(sock, 10)
    assert status_line(answer).startswith(b"HTTP/1.1 4"), answer[:200]
