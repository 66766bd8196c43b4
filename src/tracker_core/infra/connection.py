"""The one connection interface of tracker_core, and the one shape of its replies.

Every module of the core takes a connection CONN and asks it only for what ``Connection`` lists.
Two kinds of object are one:

- the hot path's ``rawredis.RawRedis`` and the topology clients built on it
  (``sentinel_redis.SentinelRedis``, ``cluster_redis.ClusterRedis``): hiredis parses and decodes
  in C;
- the admin paths' redis-py client from ``topology.admin_client``, which always decodes.

Replies have one shape whichever it is: text is ``str`` (UTF-8; bytes that are not UTF-8 come
back as lone surrogates through ``surrogateescape``), numbers are ``int``, absent values
``None``, arrays ``list``; a script's reply is its Lua table as such a list. ``hgetall`` answers
a ``dict`` on both. A core module never needs to ask whether a reply is ``bytes`` or a ``dict``.
A name read back is sent again as ``scripts.wire(name)`` (the same bytes): both clients'
packers refuse a ``str`` holding lone surrogates; the bindings of tracker_core.scripts do it for every item list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

ENCODING = "utf-8"
ENCODING_ERRORS = "surrogateescape"


class Connection(Protocol):
    def execute_command(self, *args):
        """Run one command; a Redis error raises (rawredis.RedisError, or redis-py's own)."""

    def hgetall(self, key: str) -> dict[str, str]:
        """The fields of hash KEY ({} when it does not exist)."""


class HashReads:
    """``hgetall`` over ``execute_command`` for the raw connections, as redis-py answers it."""

    execute_command: Callable[..., Any]  # the connection's own

    def hgetall(self, key: str) -> dict[str, str]:
        flat = self.execute_command("HGETALL", key)
        return dict(zip(flat[::2], flat[1::2]))
