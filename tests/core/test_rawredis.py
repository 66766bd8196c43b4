"""RawRedis: a blocking socket whose sends and receives still time out, over TCP or a Unix socket."""

import socket
import time

import pytest

from tracker_core.embedded import EmbeddedRedis
from tracker_core.rawredis import OutcomeUnknown, RawRedis

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
