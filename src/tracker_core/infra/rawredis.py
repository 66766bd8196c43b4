"""A raw, pipelined Redis connection on hiredis for the request hot path.

redis-py's per-call machinery (connection pool, command parsing, response callbacks) costs about
three times what a raw socket with hiredis's C parser costs; the hot path makes one round trip per
request, so that overhead is most of the client-side cost. Admin paths use redis-py.
"""

from __future__ import annotations

import select
import socket
import struct
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import hiredis

from tracker_core.infra.connection import ENCODING, ENCODING_ERRORS, HashReads


class RedisError(Exception):
    """Redis answered with an error, or could not be reached."""


class ConnectionLost(RedisError):
    """Redis could not be reached and none of the commands reached it: safe to send them again."""


class OutcomeUnknown(RedisError):
    """The connection broke after the commands were (partly) sent: they may have run.

    Never resent (a claim would run twice); the caller answers 503 and the client retries, as it
    does for any non-200. Not a ConnectionLost, so that no layer above resends on it either.
    """


def parse_redis_url(url: str) -> dict:
    """Split redis://[:password@]host[:port][/db] or unix:///path[?db=N] into connect options."""
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    options: dict[str, Any] = {
        "password": unquote(parsed.password) if parsed.password else None,
        "username": unquote(parsed.username) if parsed.username else None,
    }
    if parsed.scheme == "unix":
        options.update(path=parsed.path, db=int(query.get("db", ["0"])[0]))
    elif parsed.scheme in ("redis", ""):
        db = parsed.path.lstrip("/")
        options.update(host=parsed.hostname or "127.0.0.1", port=parsed.port or 6379, db=int(db) if db else 0)
    else:
        raise ValueError(f"unsupported Redis URL scheme {parsed.scheme!r}")
    return options


def blocking_with_timeouts(sock: socket.socket, timeout_s: float) -> None:
    """Make SOCK blocking, with the kernel timing out each send and receive after TIMEOUT_S.

    A Python socket with a timeout polls before every send and every receive: two system calls
    per round trip on the hot path. A blocking socket with SO_SNDTIMEO and SO_RCVTIMEO makes
    them straight away and still gives up on a Redis that stopped answering: the call fails
    with EAGAIN (an OSError, as socket.timeout is) once TIMEOUT_S passes without progress.
    """
    sock.settimeout(None)
    seconds = int(timeout_s)
    timeval = struct.pack("ll", seconds, int((timeout_s - seconds) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


class RawRedis(HashReads):
    """One blocking connection; reconnects on demand. Not thread-safe: one per process.

    Replies are decoded by hiredis in C, in the one shape of tracker_core.infra.connection.
    CONNECT_TIMEOUT_S (TIMEOUT_S when None) bounds a TCP connect apart: a host that died answers
    no SYN, and a failover's callers (tracker_core.infra.topology) want to move on well before a
    call's own timeout.
    """

    def __init__(self, url: str, timeout_s: float = 10.0, connect_timeout_s: float | None = None):
        self.url = url
        self.options = parse_redis_url(url)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._reader = hiredis.Reader(encoding=ENCODING, errors=ENCODING_ERRORS)  # anew per connection
        self._poll: select.poll | None = None

    def _connect(self) -> socket.socket:
        opts = self.options
        if "path" in opts:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            try:
                sock.connect(opts["path"])
            except OSError:
                sock.close()
                raise
        else:
            sock = socket.create_connection(
                (opts["host"], opts["port"]), timeout=self.connect_timeout_s or self.timeout_s
            )
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        blocking_with_timeouts(sock, self.timeout_s)
        self._sock = sock
        self._reader = hiredis.Reader(encoding=ENCODING, errors=ENCODING_ERRORS)
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        setup = []
        if opts.get("password"):
            setup.append(
                ("AUTH", opts["username"], opts["password"])
                if opts.get("username")
                else ("AUTH", opts["password"])
            )
        if opts.get("db"):
            setup.append(("SELECT", opts["db"]))
        if setup:
            for reply in self._roundtrip(sock, setup):
                if isinstance(reply, hiredis.ReplyError):
                    self.close()
                    raise RedisError(str(reply))
        return sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._poll = None

    def _roundtrip(self, sock: socket.socket, commands) -> list:
        sock.sendall(b"".join(hiredis.pack_command(tuple(c)) for c in commands))
        return self._replies(sock, len(commands))

    def _replies(self, sock: socket.socket, count: int) -> list:
        reader = self._reader
        replies = []
        while True:
            reply = reader.gets()
            if reply is False:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionLost("Redis closed the connection")
                reader.feed(data)
                continue
            replies.append(reply)
            if len(replies) == count:
                return replies

    def pipeline(self, commands) -> list:
        """Send all commands in one write and return their replies; errors come back as values.

        A connection Redis closed while it was idle (timeout, restart) is noticed before the
        write and reopened; a failed connect or a write refused before its first byte left is
        tried once more: Redis never saw those commands. Once any byte has left, a broken
        connection or a timeout raises OutcomeUnknown and nothing is resent: Redis may have run
        the commands (a claim run twice would hand out items nobody reports).
        """
        if not commands:  # no reply to wait for (the reply loop stops only at the last one)
            return []
        return self._exchange(b"".join([hiredis.pack_command(tuple(c)) for c in commands]), len(commands))

    def _exchange(self, payload: bytes, count: int) -> list:
        """Send PAYLOAD (COUNT packed commands) and read their COUNT replies; see pipeline."""
        for attempt in (1, 2):
            sent = 0
            try:
                # Readable while idle, with no request outstanding: Redis closed it (timeout,
                # restart, CLIENT KILL), or a stray reply; either way reopen.
                sock, poll = self._sock, self._poll
                if sock is not None and poll is not None and poll.poll(0):
                    self.close()
                    sock = None
                if sock is None:
                    sock = self._connect()
                sent = sock.send(payload)  # raises before any byte leaves, or sends some
                if sent < len(payload):
                    sock.sendall(memoryview(payload)[sent:])
                return self._replies(sock, count)
            except (OSError, ConnectionLost, hiredis.ProtocolError) as exc:
                # A bad byte in the stream leaves no way to find the next reply: drop it too.
                self.close()
                if sent:
                    raise OutcomeUnknown(
                        f"connection to Redis at {self._where()} broke after the commands were sent: {exc}"
                    ) from exc
                if attempt == 2:
                    raise ConnectionLost(f"cannot reach Redis at {self._where()}: {exc}") from exc
            except BaseException:
                # Interrupted in the middle (a signal handler's exception): the reply may still
                # come, and the next command would read it as its own.
                self.close()
                raise
        raise AssertionError("unreachable")

    def _where(self) -> str:
        opts = self.options
        return opts["path"] if "path" in opts else f"{opts['host']}:{opts['port']}"

    def execute_command(self, *args):
        reply = self._exchange(hiredis.pack_command(args), 1)[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply

    def execute_packed(self, payload: bytes):
        """Send one command already packed as RESP (PAYLOAD) and return its reply, as
        execute_command does: a caller that keeps a command's fixed part packed (the engine's
        claim and done) skips packing it again on every call."""
        reply = self._exchange(payload, 1)[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply
