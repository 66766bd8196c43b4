"""RawRedis: a blocking socket whose sends and receives still time out, over TCP or a Unix socket."""

import signal
import socket
import threading
import time

import pytest

from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.infra.rawredis import OutcomeUnknown, RawRedis

NAME = "https://example.com/a b?q=%20#x"


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never reads or answers (a hung Redis)."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    listener.close()


def test_a_redis_that_never_answers_times_out_after_the_commands_left(silent_server):
    conn = RawRedis(silent_server, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("PING")
    assert 0.25 <= time.monotonic() - started < 3.0


def test_a_redis_that_never_reads_times_out_while_sending(silent_server):
    conn = RawRedis(silent_server, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(OutcomeUnknown):
        # Far more than the socket buffers hold: the send blocks once they are full.
        conn.execute_command("SET", "k", "x" * (64 << 20))
    assert time.monotonic() - started < 5.0


# Keeps Redis busy for ARGV[1] ms.
BUSY = """
local t0 = redis.call('TIME')
repeat
  local t = redis.call('TIME')
until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= tonumber(ARGV[1]) * 1000
return 1
"""


def test_the_connection_is_reopened_after_a_timeout(redis_url, r):
    conn = RawRedis(redis_url, timeout_s=0.2)
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("EVAL", BUSY, 0, 600)
    time.sleep(0.6)  # the slow script ends
    assert conn.execute_command("SET", NAME, "1") == "OK"
    assert r.get(NAME) == "1"


def test_a_unix_socket_url_reaches_redis(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis").start()  # no port: a Unix socket only
    try:
        assert server.url.startswith("unix://")
        conn = RawRedis(server.url, timeout_s=1.0)
        assert conn.execute_command("SET", NAME, "1") == "OK"
        assert conn.hgetall("missing") == {}
        assert conn.execute_command("GET", NAME) == "1"
        conn.close()
    finally:
        server.stop()


class Interrupted(Exception):
    """What a signal handler raises in the middle of a round trip (a worker told to stop)."""


def test_a_round_trip_interrupted_by_a_signal_handler_leaves_no_reply_for_the_next(redis_url, r):
    r.set(NAME, "mine")
    conn = RawRedis(redis_url, timeout_s=3.0)

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(Interrupted):
            conn.execute_command("EVAL", BUSY, 0, 500)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # Sent while the script still runs: on the old connection this would read its 1.
    assert conn.execute_command("GET", NAME) == "mine"


@pytest.fixture
def garbage_server():
    """A TCP server that answers every connection with bytes that are not RESP."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                peer, _ = listener.accept()
            except OSError:
                return
            peer.recv(65536)
            peer.sendall(b"?not redis\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    listener.close()


def test_a_reply_that_is_not_resp_is_an_unknown_outcome(garbage_server):
    # A RedisError (503 to the warrior), not hiredis.ProtocolError (a 500).
    conn = RawRedis(garbage_server, timeout_s=1.0)
    with pytest.raises(OutcomeUnknown):
        conn.execute_command("PING")
    assert conn._sock is None  # nothing of that stream is read by the next command


def test_a_reply_larger_than_one_receive_is_read_whole(redis_url):
    conn = RawRedis(redis_url, timeout_s=3.0)
    value = "x" * (3 << 20) + "é"
    assert conn.execute_command("SET", NAME, value) == "OK"
    assert conn.pipeline([("GET", NAME), ("GET", NAME), ("PING",)]) == [value, value, "PONG"]


def test_a_connection_redis_closed_while_idle_is_reopened_quietly(redis_url, r):
    conn = RawRedis(redis_url, timeout_s=1.0)
    assert conn.execute_command("PING") == "PONG"
    assert r.execute_command("CLIENT", "KILL", "TYPE", "normal") >= 1  # as a restart would
    time.sleep(0.05)
    assert conn.execute_command("SET", NAME, "1") == "OK"
    assert r.get(NAME) == "1"


def test_an_empty_pipeline_answers_at_once(silent_server):
    conn = RawRedis(silent_server, timeout_s=0.5)
    started = time.monotonic()
    assert conn.pipeline([]) == []
    assert time.monotonic() - started < 0.4  # it waited for no reply
