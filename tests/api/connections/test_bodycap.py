"""CappedBody: what bjoern buffers is capped per body and in all, and the budget is given back;
a Content-Length past the cap is answered 413 at its first body bytes (through `tracker serve`)."""

import gc
import time

import orjson
import pytest

from support.processes import ServerProcess
from support.projects import new_project
from support.raw_http import read_until_closed, status_line
from tracker_api.connections import bodycap
from tracker_api.connections.bodycap import CappedBody
from tracker_core import keyspace
from tracker_core.keyspace import ProjectKeys


@pytest.fixture(autouse=True)
def small_caps(monkeypatch):
    monkeypatch.setattr(CappedBody, "limit_bytes", 100)
    monkeypatch.setattr(CappedBody, "budget_bytes", 150)
    monkeypatch.setattr(CappedBody, "buffered_total", 0)


def test_a_body_under_the_cap_is_kept_and_counted_until_released():
    body = CappedBody()
    assert body.write(b"x" * 60) == 60 and body.write(b"y" * 40) == 40
    assert body.refusal is None and body.getvalue() == b"x" * 60 + b"y" * 40
    assert CappedBody.buffered_total == 100
    body._release()
    assert CappedBody.buffered_total == 0 and body.kept == 0
    body._release()  # twice gives back nothing more
    assert CappedBody.buffered_total == 0


def test_a_body_past_the_cap_is_refused_and_keeps_nothing():
    body = CappedBody()
    body.write(b"x" * 60)
    assert body.write(b"y" * 41) == 41  # bjoern must never see write fail
    assert body.refusal == "too_large" and body.getvalue() == b""
    assert body.write(b"z") == 1 and body.getvalue() == b""
    assert CappedBody.buffered_total == 0


def test_bodies_past_the_budget_together_are_refused_busy():
    first, second = CappedBody(), CappedBody()
    first.write(b"x" * 100)
    second.write(b"y" * 50)
    assert second.refusal is None and CappedBody.buffered_total == 150
    third = CappedBody()
    third.write(b"z")
    assert third.refusal == "busy" and CappedBody.buffered_total == 150
    first._release()
    fourth = CappedBody()
    fourth.write(b"w" * 100)
    assert fourth.refusal is None and CappedBody.buffered_total == 150


def test_a_body_dropped_unreleased_gives_its_budget_back():
    body = CappedBody()
    body.write(b"x" * 80)
    del body
    gc.collect()
    assert CappedBody.buffered_total == 0


def test_a_released_large_body_frees_its_buffer_at_once(monkeypatch):
    monkeypatch.setattr(CappedBody, "limit_bytes", 1 << 20)
    monkeypatch.setattr(CappedBody, "budget_bytes", 2 << 20)
    large, small = CappedBody(), CappedBody()
    large.write(b"x" * bodycap._TRUNCATE_FROM_BYTES)
    small.write(b"y" * 10)
    large._release()
    small._release()
    assert large.getvalue() == b"" and CappedBody.buffered_total == 0
    assert small.getvalue() == b"y" * 10  # freed with the request, after its answer


def test_the_environ_is_found_where_bjoern_leaves_it_and_nowhere_else():
    # on_body makes the body, then stores it in the request's dict, which makes the collector
    # track the dict right after the body.
    body = CappedBody()
    environ = {"PATH_INFO": "/p/done", "HTTP_CONTENT_LENGTH": "3"}
    environ["wsgi.input"] = body
    assert bodycap._environ_of(body) is environ
    other = CappedBody()
    unrelated = {"wsgi.input": CappedBody()}  # tracked right after OTHER, but not its dict
    assert bodycap._environ_of(other) is None and unrelated


def test_a_body_written_outside_a_worker_never_looks_for_its_request():
    body = CappedBody()
    environ = {"HTTP_CONTENT_LENGTH": str(10**9)}
    environ["wsgi.input"] = body
    body.write(b"abc")  # answer_early is off outside run_capped
    assert body.refusal is None and body.getvalue() == b"abc"


def test_an_unreadable_address_is_peeked_as_none_not_a_fault():
    assert bodycap._peek(8, 16) is None
    kept = b"sixteen bytes!!!"
    assert bodycap._peek(id(kept) + bytes.__basicsize__ - 1, 16) == kept


# -- through a real `tracker serve`, raw sockets ---------------------------------------------------

LIMIT = 1 << 20  # --max-body-bytes (its smallest value)
P = "capped"
K = ProjectKeys(P)
# Far from the idle (30 s) and request (60 s) timeouts: an answer this soon is the early one.
AT_ONCE_S = 2.0


@pytest.fixture
def server(redis_url):
    s = ServerProcess(redis_url, "--max-body-bytes", str(LIMIT))
    yield s
    s.stop()


@pytest.fixture
def project(admin):
    return new_project(admin, P, ["a"])


def head(path: str, length: int) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {length}\r\n\r\n".encode()


def done_body(length: int) -> bytes:
    """A done for item "a" padded with spaces to LENGTH bytes."""
    start, end = b'{"downloader": "alice", "item": "a"', b"}"
    return start + b" " * (length - len(start) - len(end)) + end


def read_answer(sock) -> bytes:
    """One whole answer on a kept-alive connection."""
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    top, _, body = got.partition(b"\r\n\r\n")
    length = int(
        next(x for x in top.split(b"\r\n") if x.lower().startswith(b"content-length")).split(b":")[1]
    )
    while len(body) < length:
        body += sock.recv(65536)
    return top + b"\r\n\r\n" + body


@pytest.mark.usefixtures("project")
def test_a_content_length_at_the_limit_is_waited_for_and_served(server, r):
    body = done_body(LIMIT)
    with server.connect() as sock:
        sock.sendall(head(f"/{P}/done", LIMIT) + body[:3])
        sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # no early answer: the body may come
        sock.settimeout(10)
        sock.sendall(body[3:])
        answer = read_answer(sock)
    assert status_line(answer) == b"HTTP/1.1 200 OK" and answer.endswith(b"\r\n\r\nOK")
    # The app read it whole: a done for a queued item, refused by the done rules, not the cap.
    assert r.hget(K.stats, "dones_refused") == "1"
    assert r.hget(K.stats, "bad_too_large") is None


@pytest.mark.usefixtures("project")
def test_a_content_length_one_past_the_limit_is_refused_at_once_and_counted(server, r):
    with server.connect() as sock:
        sock.sendall(head(f"/{P}/done", LIMIT + 1) + b'{"downloader": "alice", "item": "a"}')
        answer, closed_after = read_until_closed(sock, 10)
    assert closed_after is not None and closed_after < AT_ONCE_S
    assert status_line(answer) == b"HTTP/1.1 413 Content Too Large"
    assert b"Connection: close" in answer
    assert answer.endswith(f"\r\n\r\nrequest body too large (limit {LIMIT} bytes)\n".encode())
    assert r.hget(K.stats, "bad_too_large") == "1"
    assert r.smembers(K.todo) == {"a"} and not r.exists(K.done)  # nothing else changed
    assert b"200 OK" in server.get()  # and the worker serves on


def test_past_the_limit_with_no_such_project_counts_globally_and_creates_no_keys(server, r):
    with server.connect() as sock:
        sock.sendall(head("/nosuch/done", 10**12) + b"x")
        answer, closed_after = read_until_closed(sock, 10)
    assert closed_after is not None and closed_after < AT_ONCE_S
    assert status_line(answer) == b"HTTP/1.1 413 Content Too Large"
    assert r.hget(keyspace.GLOBAL_STATS, "bad_too_large") == "1"
    assert not r.keys("*nosuch*")


def test_backfeed_is_refused_at_once_in_json(server):
    with server.connect() as sock:
        sock.sendall(head("/backfeed/legacy/x-abc", LIMIT + 1) + b"x")
        answer, closed_after = read_until_closed(sock, 10)
    assert closed_after is not None and closed_after < AT_ONCE_S
    _, _, body = answer.partition(b"\r\n\r\n")
    assert orjson.loads(body) == {
        "status_code": 413,
        "reason": f"request body too large (limit {LIMIT} bytes)",
    }


def test_a_head_alone_then_its_first_bytes_on_a_kept_alive_connection(server):
    """The head arrives, the body's first bytes later (another read): refused as they come, on
    a connection that has served a request before (its bjoern Request is reused)."""
    with server.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status_line(read_answer(sock)) == b"HTTP/1.1 200 OK"
        sock.sendall(head("/p/done", LIMIT + 1))
        time.sleep(0.3)
        started = time.monotonic()
        sock.sendall(b"abc")
        answer, closed_after = read_until_closed(sock, 10)
    assert closed_after is not None and time.monotonic() - started < AT_ONCE_S
    assert status_line(answer) == b"HTTP/1.1 413 Content Too Large"
