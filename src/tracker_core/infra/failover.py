"""What the Sentinel and Cluster connections share to ride out a failover.

Owns how long a call waits for a new primary and how long a node is probed, the reading of a
reply that is an error, and ReplicaAcks: the ``WAIT`` after each script on a primary with a
replica attached, so that a failover loses no acknowledged change (NotAcknowledged otherwise).
"""

from __future__ import annotations

import time

import hiredis

from tracker_core.infra.connection import HashReads
from tracker_core.infra.rawredis import RedisError

# How long a call may wait for a Sentinel's new primary or a cluster slot mid-migration
# (TRYAGAIN), and how long a cluster node whose host answered no SYN is not tried again while
# the map names it; the warrior client gives up after 20 s, so we answer 503 well before that.
FAILOVER_WAIT_S = 12.0
# How often a Sentinel connection re-reads how many replicas its primary has (ROLE, piggybacked
# on a request's round trip).
REPLICA_CHECK_S = 1.0
# How long a node asked for the slot map or the primary (Sentinel) may take, and a connect to a
# primary: a hung node, or a host that died and answers no SYN, is passed over after this (twice
# for a connect: RawRedis tries again), not after a call's 10 s.
PROBE_TIMEOUT_S = 2.0


class NotAcknowledged(RedisError):
    """No replica confirmed a change in time: answered 503 so that the client retries."""


def error_text(reply) -> str | None:
    """The text of an error REPLY (hiredis hands errors back as values); None for any other."""
    return str(reply) if isinstance(reply, hiredis.ReplyError) else None


def is_script(command) -> bool:
    """Whether COMMAND runs a script (a change a replica must acknowledge)."""
    return str(command[0]).upper() in ("EVALSHA", "EVAL")


class ReplicaAcks:
    """Whether one primary has replicas attached, and the ``WAIT`` that follows its scripts.

    ``ROLE`` (which lists the replicas attached) rides in front of a call's commands at most every
    REPLICA_CHECK_S. While the primary has a replica, a call with a script gets ``WAIT N T`` after
    it in the same round trip, and a script that fewer than N replicas acknowledged within T ms
    raises NotAcknowledged (503: the client retries; done is idempotent). A primary with no
    replica attached is not waited for (it serves on its AOF alone); N = 0 never waits. Used by
    SentinelRedis for its one primary and by ClusterRedis for each primary it sends to.
    """

    def __init__(self, spec: dict, replicas: int = 0):
        self.wanted = spec["wait_replicas"]
        self.timeout_ms = spec["wait_timeout_ms"]
        self.replicas = replicas  # a first guess until ROLE says
        self.checked_at = 0.0

    def frame(self, commands) -> tuple[list, bool, bool]:
        """COMMANDS with a ROLE before them when due and a WAIT after them when they hold a script;
        and whether each was added."""
        framed = list(commands)
        if self.wanted <= 0:
            return framed, False, False
        role = time.monotonic() >= self.checked_at + REPLICA_CHECK_S
        if role:
            framed.insert(0, ("ROLE",))
        wait = self.replicas > 0 and any(is_script(c) for c in commands)
        if wait:
            framed.append(("WAIT", self.wanted, self.timeout_ms))
        return framed, role, wait

    def unframe(self, replies: list, role: bool, wait: bool) -> tuple[list, int | None]:
        """The replies to the caller's commands, and how many replicas WAIT counted (None: none sent)."""
        if role:
            self.note_role(replies.pop(0))
        return replies, replies.pop() if wait else None

    def check(self, acknowledged) -> None:
        """Raise NotAcknowledged when WAIT counted fewer replicas than wanted (None: no WAIT)."""
        if acknowledged is not None and (not isinstance(acknowledged, int) or acknowledged < self.wanted):
            self.checked_at = 0.0  # look again before the next write
            raise NotAcknowledged("the change was not acknowledged by a replica in time")

    def note_role(self, reply) -> None:
        if isinstance(reply, list) and reply and reply[0] == "master":
            self.replicas = len(reply[2])
            self.checked_at = time.monotonic()


class PipelinedConnection(HashReads):
    """A connection whose every command goes through its own ``pipeline`` (Sentinel, Cluster)."""

    def pipeline(self, commands) -> list:
        raise NotImplementedError

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply
