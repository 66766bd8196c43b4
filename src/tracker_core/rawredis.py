"""A raw, pipelined Redis connection on hiredis for the request hot path.

redis-py's per-call machinery (connection pool, command parsing, response callbacks) costs about
three times what a raw socket with hiredis's C parser costs; the hot path makes one round trip per
request, so that overhead is most of the client-side cost. Admin paths use redis-py.
"""
from __future__ import annotations

import socket
from urllib.parse import parse_qs, unquote, urlparse

import hiredis


class RedisError(Exception):
    """Redis answered with an error, or could not be reached."""


class ConnectionLost(RedisError):
    pass


def parse_redis_url(url: str) -> dict:
    """Split redis://[:password@]host[:port][/db] or unix:///path[?db=N] into connect options."""
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    options = {"password": unquote(parsed.password) if parsed.password else None,
               "username": unquote(parsed.username) if parsed.username else None}
    if parsed.scheme == "unix":
        options.update(path=parsed.path, db=int(query.get("db", ["0"])[0]))
    elif parsed.scheme in ("redis", ""):
        db = parsed.path.lstrip("/")
        options.update(host=parsed.hostname or "127.0.0.1", port=parsed.port or 6379,
                       db=int(db) if db else 0)
    else:
        raise ValueError(f"unsupported Redis URL scheme {parsed.scheme!r}")
    return options


class RawRedis:
    """One blocking connection; reconnects on demand. Not thread-safe: one per process."""

    def __init__(self, url: str, timeout_s: float = 10.0):
        self.url = url
        self.options = parse_redis_url(url)
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._reader: hiredis.Reader | None = None

    def _connect(self) -> None:
        opts = self.options
        if "path" in opts:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            sock.connect(opts["path"])
        else:
            sock = socket.create_connection((opts["host"], opts["port"]), timeout=self.timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._reader = hiredis.Reader(encoding="utf-8", errors="surrogateescape")
        setup = []
        if opts.get("password"):
            setup.append(("AUTH", opts["username"], opts["password"]) if opts.get("username")
                         else ("AUTH", opts["password"]))
        if opts.get("db"):
            setup.append(("SELECT", opts["db"]))
        if setup:
            for reply in self._roundtrip(setup):
                if isinstance(reply, hiredis.ReplyError):
                    self.close()
                    raise RedisError(str(reply))

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._reader = None

    def _roundtrip(self, commands) -> list:
        sock, reader = self._sock, self._reader
        sock.sendall(b"".join(hiredis.pack_command(tuple(c)) for c in commands))
        replies = []
        while len(replies) < len(commands):
            reply = reader.gets()
            if reply is False:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionLost("Redis closed the connection")
                reader.feed(data)
                continue
            replies.append(reply)
        return replies

    def pipeline(self, commands) -> list:
        """Send all commands in one write and return their replies; errors come back as values.

        A connection found dead is reopened once: Redis closes idle or old connections (timeout,
        restart), and a command on a socket Redis had already closed was never executed.
        """
        for attempt in (1, 2):
            try:
                if self._sock is None:
                    self._connect()
                return self._roundtrip(commands)
            except (OSError, ConnectionLost) as exc:
                self.close()
                if attempt == 2:
                    raise ConnectionLost(f"cannot reach Redis at {self.url}: {exc}") from exc
        raise AssertionError("unreachable")

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply
