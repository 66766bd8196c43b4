"""Pick the data layer from one URL: a single Redis, a Sentinel-managed primary, or a Redis Cluster.

The hot path keeps its raw hiredis connection (``RawRedis``) in all three:

- ``redis://`` and ``unix://``: one connection.
- ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB][?wait_replicas=N]``: asks
  the sentinels for the primary of SERVICE, and after a failover (connection lost, or the old
  primary answering READONLY) asks again and resumes. While the primary has replicas attached,
  every script call is followed in the same round trip by ``WAIT N`` (default N=1), so a state
  change is answered only once a replica holds it and a failover loses no acknowledged done; a
  change no replica acknowledged in time gets 503 and the client retries (done is idempotent).
  A primary with no replica attached (after a failover, before the old primary returns) keeps
  serving on its AOF alone: refusing every write then would stop the whole project.
  ``wait_replicas=0`` never waits.
- ``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]``: routes each command to the node that
  owns its key's hash slot (every project key carries the hash tag ``{PROJECT}``, so a project's
  scripts run on one node) and follows MOVED and ASK redirections.

Commands are sent again (to a new primary, or to the slot's new owner) only when none of them
can have reached Redis (``ConnectionLost``); once they were sent, a broken connection or a
timeout raises ``OutcomeUnknown`` (answered 503) and nothing is resent: a claim must not run
twice.

Admin paths get the matching redis-py client from ``admin_client``.
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs, quote, unquote, urlsplit

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from tracker_core.connection import ENCODING, ENCODING_ERRORS, HashReads
from tracker_core.rawredis import ConnectionLost, OutcomeUnknown, RawRedis, RedisError


class NotAcknowledged(RedisError):
    """No replica confirmed a change in time: answered 503 so that the client retries."""


SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
# How long a call may wait for a new primary or a cluster that is re-forming; the warrior client
# gives up after 20 s, so we answer 503 well before that.
FAILOVER_WAIT_S = 12.0
# How often a Sentinel connection re-reads how many replicas its primary has (ROLE, piggybacked
# on a request's round trip).
REPLICA_CHECK_S = 1.0
_MAX_REDIRECTS = 5


def _split_hosts(netloc: str) -> tuple[str | None, list[tuple[str, int]]]:
    """'[:pw@]h1:p1,h2:p2' -> (password, [(h1, p1), (h2, p2)])."""
    password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        password = unquote(auth.split(":", 1)[1] if ":" in auth else auth) or None
    hosts = []
    for part in netloc.split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad host:port {part!r} in Redis URL")
        hosts.append((host.strip("[]"), int(port)))
    return password, hosts


def _node_url(host: str, port: int, password: str | None, db: int = 0) -> str:
    auth = f":{quote(password, safe='')}@" if password else ""
    return f"redis://{auth}{host}:{port}/{db}"


def parse_topology_url(url: str) -> dict:
    """Describe URL: {'kind': 'single'|'sentinel'|'cluster', ...}; ValueError when malformed."""
    parts = urlsplit(url)
    if parts.scheme == SENTINEL_SCHEME:
        password, hosts = _split_hosts(parts.netloc)
        path = [p for p in parts.path.split("/") if p]
        if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise ValueError("a Sentinel URL names the service: redis+sentinel://HOSTS/SERVICE[/DB]")
        query = parse_qs(parts.query)
        return {
            "kind": "sentinel",
            "password": password,
            "sentinels": hosts,
            "service": path[0],
            "db": int(path[1]) if len(path) == 2 else 0,
            "wait_replicas": int(query.get("wait_replicas", ["1"])[0]),
            "wait_timeout_ms": int(query.get("wait_timeout_ms", ["2000"])[0]),
        }
    if parts.scheme == CLUSTER_SCHEME:
        password, hosts = _split_hosts(parts.netloc)
        if parts.path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0")
        return {"kind": "cluster", "password": password, "nodes": hosts}
    return {"kind": "single", "url": url}


def connect(url: str):
    """The hot path's connection for URL: RawRedis, SentinelRedis or ClusterRedis."""
    spec = parse_topology_url(url)
    if spec["kind"] == "sentinel":
        return SentinelRedis(url, spec)
    if spec["kind"] == "cluster":
        return ClusterRedis(url, spec)
    return RawRedis(url)


def admin_client(url: str, **options):
    """The redis-py client for admin paths, of the same topology as ``connect(url)``.

    No retries of its own (redis-py 8 retries after a timeout by default): a change whose answer
    was lost must not be made twice; the caller reports the error (the admin API answers 503).
    A Cluster client keeps its own retries, which follow MOVED and ASK redirections.
    Replies are always decoded as tracker_core.connection describes (one shape on every client).
    """
    spec = parse_topology_url(url)
    options.setdefault("decode_responses", True)
    options.setdefault("encoding", ENCODING)
    options.setdefault("encoding_errors", ENCODING_ERRORS)
    if spec["kind"] != "cluster":
        options.setdefault("retry", Retry(NoBackoff(), 0))
    if spec["kind"] == "sentinel":
        from redis.sentinel import Sentinel

        sentinel = Sentinel(spec["sentinels"], socket_timeout=10, password=None)
        return sentinel.master_for(
            spec["service"], db=spec["db"], password=spec["password"], socket_timeout=10, **options
        )
    if spec["kind"] == "cluster":
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in spec["nodes"]], password=spec["password"], **options
        )
    return redis.Redis.from_url(url, **options)


def _error_text(reply) -> str | None:
    return str(reply) if isinstance(reply, hiredis.ReplyError) else None


def _command_key(command) -> str | None:
    """The key a command is routed by: the first key of a script, else the first argument."""
    name = str(command[0]).upper()
    if name in ("EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"):
        return command[3] if int(command[2]) > 0 else None
    if name in ("PING", "INFO", "SCRIPT", "WAIT", "ASKING", "CLUSTER", "ROLE", "TIME", "DBSIZE"):
        return None
    return command[1] if len(command) > 1 else None


def _is_script(command) -> bool:
    return str(command[0]).upper() in ("EVALSHA", "EVAL")


class SentinelRedis(HashReads):
    """A RawRedis to the current primary of a Sentinel service, found again after a failover."""

    def __init__(self, url: str, spec: dict):
        self.url = url
        self.spec = spec
        self._primary: RawRedis | None = None
        self._replicas = 0
        self._replicas_checked_at = 0.0

    def _discover(self) -> RawRedis:
        errors = []
        for host, port in self.spec["sentinels"]:
            sentinel = RawRedis(_node_url(host, port, None), timeout_s=2.0)
            try:
                addr = sentinel.execute_command("SENTINEL", "get-master-addr-by-name", self.spec["service"])
            except RedisError as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            finally:
                sentinel.close()
            if not addr:
                errors.append(f"{host}:{port}: does not know {self.spec['service']!r}")
                continue
            primary = RawRedis(_node_url(addr[0], int(addr[1]), self.spec["password"], self.spec["db"]))
            try:
                role = primary.execute_command("ROLE")
            except RedisError as exc:
                errors.append(f"primary {addr[0]}:{addr[1]}: {exc}")
                primary.close()
                continue
            if role and role[0] == "master":
                self._note_role(role)
                return primary
            primary.close()
            errors.append(f"{addr[0]}:{addr[1]} is not a primary yet")
        raise ConnectionLost(
            f"no primary for Sentinel service {self.spec['service']!r}: " + "; ".join(errors)
        )

    def _framed(self, commands) -> tuple[list, bool, bool]:
        """COMMANDS with a ROLE check before them when due and a WAIT after a script."""
        framed, role = list(commands), False
        if self.spec["wait_replicas"] <= 0:
            return framed, False, False
        if time.monotonic() >= self._replicas_checked_at + REPLICA_CHECK_S:
            framed.insert(0, ("ROLE",))
            role = True
        wait = self._replicas > 0 and any(_is_script(c) for c in commands)
        if wait:
            framed.append(("WAIT", self.spec["wait_replicas"], self.spec["wait_timeout_ms"]))
        return framed, role, wait

    def pipeline(self, commands) -> list:
        """Run COMMANDS on the primary; on a failover find the new primary and run them there."""
        deadline = time.monotonic() + FAILOVER_WAIT_S
        while True:
            try:
                # Discovery first: it reads the new primary's replicas, which decides the WAIT.
                if self._primary is None:
                    self._primary = self._discover()
                framed, role, wait = self._framed(commands)
                replies = self._primary.pipeline(framed)
                if not any((_error_text(r) or "").startswith("READONLY") for r in replies):
                    break
                # The old primary was demoted: nothing was written; go find the new one.
                self.close()
            except ConnectionLost:
                # Nothing reached Redis (RawRedis raises OutcomeUnknown once anything was sent):
                # safe to send again, to whichever node is the primary by then.
                self.close()
            except OutcomeUnknown:
                self.close()  # the next call asks Sentinel again
                raise
            if time.monotonic() > deadline:
                raise ConnectionLost(
                    f"no writable primary for {self.spec['service']!r} after {FAILOVER_WAIT_S:.0f} s"
                )
            time.sleep(0.2)
        if role:
            self._note_role(replies.pop(0))
        if wait:
            acknowledged = replies.pop()
            if not isinstance(acknowledged, int) or acknowledged < self.spec["wait_replicas"]:
                self._replicas_checked_at = 0.0  # look again before the next write
                raise NotAcknowledged("the change was not acknowledged by a replica in time")
        return replies

    def _note_role(self, reply) -> None:
        if isinstance(reply, list) and reply and reply[0] == "master":
            self._replicas = len(reply[2])
            self._replicas_checked_at = time.monotonic()

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply

    def close(self) -> None:
        if self._primary is not None:
            self._primary.close()
            self._primary = None
        self._replicas_checked_at = 0.0


class ClusterRedis(HashReads):
    """RawRedis connections to every primary of a Redis Cluster, each command sent by hash slot."""

    def __init__(self, url: str, spec: dict):
        self.url = url
        self.spec = spec
        self._nodes: dict[tuple[str, int], RawRedis] = {}
        self._slots: list[tuple[str, int] | None] = [None] * 16384
        self._slot_cache: dict[str, int] = {}

    # -- topology --------------------------------------------------------------------------------

    def _node(self, addr: tuple[str, int]) -> RawRedis:
        conn = self._nodes.get(addr)
        if conn is None:
            conn = self._nodes[addr] = RawRedis(_node_url(addr[0], addr[1], self.spec["password"]))
        return conn

    def refresh_slots(self) -> None:
        """Load the slot map from the first node that answers CLUSTER SLOTS."""
        errors = []
        candidates = list(dict.fromkeys([*self._nodes, *self.spec["nodes"]]))
        for addr in candidates:
            try:
                ranges = self._node(addr).execute_command("CLUSTER", "SLOTS")
            except RedisError as exc:
                errors.append(f"{addr[0]}:{addr[1]}: {exc}")
                continue
            slots: list[tuple[str, int] | None] = [None] * 16384
            for start, end, primary, *_replicas in ranges:
                owner = (primary[0] or addr[0], int(primary[1]))
                for slot in range(int(start), int(end) + 1):
                    slots[slot] = owner
            self._slots = slots
            return
        raise ConnectionLost("no cluster node answered CLUSTER SLOTS: " + "; ".join(errors))

    def _slot(self, key: str) -> int:
        slot = self._slot_cache.get(key)
        if slot is None:
            slot = key_slot(key.encode("utf-8", "surrogateescape"))
            if len(self._slot_cache) > 100_000:
                self._slot_cache.clear()
            self._slot_cache[key] = slot
        return slot

    def _owner(self, slot: int | None) -> tuple[str, int]:
        if slot is None:
            if not self._nodes:
                self.refresh_slots()
            return next(iter(self._nodes)) if self._nodes else self.spec["nodes"][0]
        owner = self._slots[slot]
        if owner is None:
            self.refresh_slots()
            owner = self._slots[slot]
            if owner is None:
                raise RedisError(f"hash slot {slot} is not served by any node")
        return owner

    # -- commands --------------------------------------------------------------------------------

    def pipeline(self, commands) -> list:
        """Send COMMANDS (all for one hash slot, as the engine's are) to the slot's owner.

        Each command that comes back redirected was not run, and only those are sent again: a
        MOVED reply updates the map and resends them to the new owner; ASK sends them to the node
        that is importing the slot, each preceded by its own ASKING (ASKING covers one command
        only). Mid-migration some of a pipeline's keys may still be on the old owner and some on
        the new: every reply comes from the node that ran its command. Commands of one pipeline
        must share a slot: the engine only pipelines commands of one project.

        A node that cannot be reached (nothing sent) is dropped and the slot map reloaded; a
        connection that broke after the commands left raises OutcomeUnknown, never resends.
        """
        commands = list(commands)
        key = next((k for k in map(_command_key, commands) if k is not None), None)
        slot = self._slot(key) if key is not None else None
        addr = self._owner(slot)
        replies: list = [None] * len(commands)
        pending = list(range(len(commands)))
        asking = False
        deadline = time.monotonic() + FAILOVER_WAIT_S
        redirects = 0
        while True:
            conn = self._node(addr)
            batch = [commands[i] for i in pending]
            try:
                if asking:
                    got = conn.pipeline([c for command in batch for c in (("ASKING",), command)])[1::2]
                else:
                    got = conn.pipeline(batch)
            except ConnectionLost:
                self._forget(addr)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                self.refresh_slots_quietly()
                addr, asking = self._owner(slot), False
                continue
            except OutcomeUnknown:
                self._forget(addr)
                raise
            redirected, redirect = [], None
            for index, reply in zip(pending, got):
                text = _error_text(reply)
                if text and text.split(" ", 1)[0] in ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"):
                    redirected.append(index)
                    redirect = redirect or text
                else:
                    replies[index] = reply
            if redirect is None:
                return replies
            pending = redirected
            redirects += 1
            if redirects > _MAX_REDIRECTS and time.monotonic() > deadline:
                raise RedisError(f"cluster keeps redirecting: {redirect}")
            kind, *rest = redirect.split(" ")
            if kind in ("MOVED", "ASK"):
                host, _, port = rest[1].rpartition(":")
                target = (host or addr[0], int(port))
                if kind == "MOVED":
                    self._slots[int(rest[0])] = target
                    asking = False
                else:
                    asking = True
                addr = target
            else:
                # TRYAGAIN: a multi-key script met a slot in mid-migration (some keys moved,
                # some not); CLUSTERDOWN: the cluster is re-forming. Both pass within moments:
                # wait a little and start again from the slot's owner.
                time.sleep(0.05)
                addr, asking = self._owner(slot), False

    def refresh_slots_quietly(self) -> None:
        try:
            self.refresh_slots()
        except ConnectionLost:
            pass

    def _forget(self, addr) -> None:
        conn = self._nodes.pop(addr, None)
        if conn is not None:
            conn.close()

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
