"""The hot path's connections to a Redis Cluster: each command sent to its hash slot's primary.

Owns ClusterRedis: the slot map (read again from another node when a primary fails), MOVED, ASK,
TRYAGAIN and CLUSTERDOWN, and a ReplicaAcks (failover.py) per primary. topology.py's docstring
tells the guarantees.
"""

from __future__ import annotations

import itertools
import time

from redis.crc import key_slot

from tracker_core.infra.failover import (
    FAILOVER_WAIT_S,
    PROBE_TIMEOUT_S,
    PipelinedConnection,
    ReplicaAcks,
    error_text,
    is_script,
)
from tracker_core.infra.rawredis import ConnectionLost, OutcomeUnknown, RawRedis, RedisError
from tracker_core.infra.redis_urls import node_url

REREAD_S = 0.05  # a cluster's slot map is read at most this often while a primary is out
REDIRECT_PAUSE_S = 0.05  # before a command TRYAGAIN or CLUSTERDOWN refused is sent again
_MAX_REDIRECTS = 5


def _command_key(command) -> str | None:
    """The key a command is routed by: the first key of a script, else the first argument."""
    name = str(command[0]).upper()
    if name in ("EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"):
        return command[3] if int(command[2]) > 0 else None
    if name in ("PING", "INFO", "SCRIPT", "WAIT", "ASKING", "CLUSTER", "ROLE", "TIME", "DBSIZE"):
        return None
    return command[1] if len(command) > 1 else None


# Replies after which a command was not run (Redis checks the slot before it runs anything).
_REDIRECTIONS = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN")


class ClusterRedis(PipelinedConnection):
    """RawRedis connections to the primaries of a Redis Cluster, each command sent by hash slot."""

    def __init__(self, url: str, spec: dict):
        self.url = url
        self.spec = spec
        self._nodes: dict[tuple[str, int], RawRedis] = {}
        self._acks: dict[tuple[str, int], ReplicaAcks] = {}
        # Every node heard of (the URL's, then the primaries and replicas CLUSTER SLOTS named):
        # where the slot map is asked for when the nodes in use fail.
        self._known: dict[tuple[str, int], None] = dict.fromkeys(spec["nodes"])
        self._slots: list[tuple[str, int] | None] = [None] * 16384
        self._replicas_of: dict[tuple[str, int], int] = {}  # per primary, as CLUSTER SLOTS says
        self._slot_cache: dict[str, int] = {}
        self._stale = True  # read the slot map before the next command
        self._suspect: tuple[str, int] | None = None  # asked last when the map is read again
        self._read_at = float("-inf")  # when the slot map was last read (monotonic)
        # Nodes whose connect timed out (a host that died answers no SYN) -> until when no call
        # tries them again while the map still names them: each try would cost seconds.
        self._down: dict[tuple[str, int], float] = {}
        # Nodes that did not answer CLUSTER SLOTS -> until when they are asked last for it.
        self._unanswered: dict[tuple[str, int], float] = {}

    # -- topology --------------------------------------------------------------------------------

    def _node(self, addr: tuple[str, int]) -> RawRedis:
        conn = self._nodes.get(addr)
        if conn is None:
            conn = self._nodes[addr] = RawRedis(
                node_url(addr[0], addr[1], self.spec["password"]), connect_timeout_s=PROBE_TIMEOUT_S
            )
            self._acks[addr] = ReplicaAcks(self.spec, self._replicas_of.get(addr, 0))
        return conn

    def refresh_slots(self, suspect: tuple[str, int] | None = None) -> None:
        """Load the slot map from the first node that answers CLUSTER SLOTS.

        The nodes in use are asked first, then every other node heard of, those that did not
        answer lately after them, SUSPECT last (a node that just failed a call: it may hang, or
        still think it owns its slots). Each is asked on a connection of its own with a short
        timeout: a hung node costs PROBE_TIMEOUT_S here, not a call's timeout.
        """
        now = time.monotonic()
        candidates = sorted(
            (a for a in dict.fromkeys([*self._nodes, *self._known]) if a != suspect),
            key=lambda a: self._unanswered.get(a, 0.0) > now,
        )
        if suspect is not None:
            candidates.append(suspect)
        errors = []
        for addr in candidates:
            probe = RawRedis(node_url(addr[0], addr[1], self.spec["password"]), timeout_s=PROBE_TIMEOUT_S)
            try:
                ranges = probe.execute_command("CLUSTER", "SLOTS")
            except RedisError as exc:
                errors.append(f"{addr[0]}:{addr[1]}: {exc}")
                self._unanswered[addr] = time.monotonic() + FAILOVER_WAIT_S
                continue
            finally:
                probe.close()
            self._unanswered.pop(addr, None)
            self._load_slots(ranges, addr[0])
            return
        raise ConnectionLost("no cluster node answered CLUSTER SLOTS: " + "; ".join(errors))

    def _load_slots(self, ranges, host: str) -> None:
        slots: list[tuple[str, int] | None] = [None] * 16384
        replicas: dict[tuple[str, int], int] = {}
        for start, end, primary, *copies in ranges:
            owner = (primary[0] or host, int(primary[1]))
            replicas[owner] = len(copies)
            self._known.update(dict.fromkeys([owner, *((c[0] or host, int(c[1])) for c in copies)]))
            slots[int(start) : int(end) + 1] = [owner] * (int(end) - int(start) + 1)
        self._slots, self._replicas_of = slots, replicas
        self._stale, self._suspect = False, None
        self._read_at = time.monotonic()

    def refresh_slots_quietly(self, suspect: tuple[str, int] | None = None, fresh_s: float = 0.0) -> None:
        """refresh_slots unless the map was read in the last FRESH_S seconds; the map it has is
        kept when no node answers (the call then fails by itself)."""
        if time.monotonic() - self._read_at < fresh_s:
            return
        try:
            self.refresh_slots(suspect)
        except ConnectionLost:
            pass

    def _slot(self, key: str) -> int:
        slot = self._slot_cache.get(key)
        if slot is None:
            slot = key_slot(key.encode("utf-8", "surrogateescape"))
            if len(self._slot_cache) > 100_000:
                self._slot_cache.clear()
            self._slot_cache[key] = slot
        return slot

    def _owner(self, slot: int | None, failed=()) -> tuple[str, int]:
        """The primary to send to: SLOT's owner, or for a command of no key a primary in use
        (else one of the map's) that is not in FAILED. ConnectionLost when the map names none
        or one in FAILED (a primary that failed this call: the slot has no reachable owner yet)."""
        if self._stale:
            self.refresh_slots(self._suspect)
        if slot is None:
            candidates = itertools.chain(self._nodes, self._slots)
            owner = next((a for a in candidates if a is not None and a not in failed), None)
        else:
            owner = self._slots[slot]
        if owner is None or owner in failed:
            raise ConnectionLost(f"hash slot {slot} has no reachable primary (yet): {owner or 'none'}")
        return owner

    # -- commands --------------------------------------------------------------------------------

    def pipeline(self, commands) -> list:
        """Send COMMANDS (all for one hash slot, as the engine's are) to the slot's owner.

        Each command that comes back redirected was not run, and only those are sent again: a
        MOVED reply reloads the map and resends them to the new owner; ASK sends them to the node
        that is importing the slot, each preceded by its own ASKING (ASKING covers one command
        only); TRYAGAIN (a slot mid-migration) waits a moment and starts again from the slot's
        owner, for at most FAILOVER_WAIT_S; CLUSTERDOWN is handled as an unreachable owner. Mid-migration some of a pipeline's keys
        may still be on the old owner and some on the new: every reply comes from the node that
        ran its command. Commands of one pipeline must share a slot: the engine only pipelines
        commands of one project.

        A node that cannot be reached (nothing sent) is dropped and the slot map read again
        from the others: when it names a new owner the commands go there, else ConnectionLost
        at once (503; the client retries). A call does not wait out a failover: the worker
        serves every project, and one call waiting for one primary's replica would hold up the
        calls of projects on the healthy ones (the cluster_failover benchmark measured 3.9 s of
        that). A connection that broke or timed out after the commands left raises
        OutcomeUnknown and nothing is resent; the next call reads the map first (the node may
        hang, and its slots be failed over meanwhile). Scripts that ran on a primary with a
        replica attached are acknowledged by ``WAIT`` (ReplicaAcks).
        """
        commands = list(commands)
        key = next((k for k in map(_command_key, commands) if k is not None), None)
        slot = self._slot(key) if key is not None else None
        addr, asking = None, False
        replies: list = [None] * len(commands)
        pending = list(range(len(commands)))
        deadline = time.monotonic() + FAILOVER_WAIT_S
        redirects = 0
        failed: set[tuple[str, int]] = set()  # primaries this call could not reach
        while True:
            batch = [commands[i] for i in pending]
            try:
                addr = addr or self._owner(slot, failed)
                got, acknowledged = self._send(addr, batch, asking)
            except ConnectionLost as exc:
                if addr is None:
                    raise  # no owner to try (the map names one that failed, or none)
                self._forget(addr)
                failed.add(addr)
                if isinstance(exc.__cause__, TimeoutError):  # the host answers no SYN
                    self._down[addr] = time.monotonic() + FAILOVER_WAIT_S
                # A new owner by now? (Read at most every REREAD_S while a primary is out.)
                self.refresh_slots_quietly(suspect=addr, fresh_s=REREAD_S)
                addr, asking = None, False
                continue
            except OutcomeUnknown:
                self._forget(addr)
                self._stale, self._suspect = True, addr
                raise
            redirected, redirect, ran_script = [], None, False
            for index, command, reply in zip(pending, batch, got):
                text = error_text(reply)
                if text and text.split(" ", 1)[0] in _REDIRECTIONS:
                    redirected.append(index)
                    redirect = redirect or text
                else:
                    replies[index] = reply
                    ran_script = ran_script or is_script(command)
            if ran_script:
                self._acks[addr].check(acknowledged)
            if redirect is None:
                return replies
            pending = redirected
            redirects += 1
            kind, *rest = redirect.split(" ")
            if redirects > _MAX_REDIRECTS or kind not in ("MOVED", "ASK"):
                if time.monotonic() > deadline:
                    raise ConnectionLost(
                        f"hash slot {slot} not served within {FAILOVER_WAIT_S:.0f} s: {redirect}"
                    )
                time.sleep(REDIRECT_PAUSE_S)
            if kind in ("MOVED", "ASK"):
                host, _, port = rest[1].rpartition(":")
                target = (host or addr[0], int(port))
                if kind == "MOVED":
                    # The slot has a new owner (a reshard, a failover): so may its neighbours.
                    self.refresh_slots_quietly()
                    self._slots[int(rest[0])] = target
                addr, asking = target, kind == "ASK"
            else:
                # CLUSTERDOWN: a primary failed and is not replaced yet (every node says so when
                # the cluster requires full coverage), or this node is one that just came back
                # (it refuses writes until the cluster had time to tell it who owns its old
                # slots now, and meanwhile its own map is stale: asked last). Sent elsewhere
                # only when the map names another owner, else ConnectionLost (nothing ran).
                if kind == "CLUSTERDOWN":
                    failed.add(addr)
                    self.refresh_slots_quietly(suspect=addr, fresh_s=REREAD_S)
                addr, asking = None, False

    def _send(self, addr: tuple[str, int], batch: list, asking: bool) -> tuple[list, int | None]:
        """BATCH's replies from ADDR (each command after its own ASKING when ASKING), framed by
        the node's ReplicaAcks; and how many replicas its WAIT counted (None: no WAIT). A node
        whose connect timed out a moment ago is not tried again (ConnectionLost)."""
        if addr not in self._nodes and self._down.get(addr, 0.0) > time.monotonic():
            raise ConnectionLost(f"{addr[0]}:{addr[1]} did not answer a connect a moment ago")
        self._down.pop(addr, None)
        conn = self._node(addr)
        acks = self._acks[addr]
        body = [c for command in batch for c in (("ASKING",), command)] if asking else batch
        framed, role, wait = acks.frame(body)
        replies, acknowledged = acks.unframe(conn.pipeline(framed), role, wait)
        return (replies[1::2] if asking else replies), acknowledged

    def _forget(self, addr) -> None:
        conn = self._nodes.pop(addr, None)
        self._acks.pop(addr, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
        self._acks.clear()
