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
- ``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...][?wait_replicas=N]``: routes each command
  to the node that owns its key's hash slot (every project key carries the hash tag ``{PROJECT}``,
  so a project's scripts run on one node) and follows MOVED and ASK redirections. When a primary
  fails (connection refused, an answer lost, CLUSTERDOWN, MOVED) it reads the slot map again from
  another node, the failed one last, and goes on with whichever node owns the slot by then: its
  replica once the cluster has promoted it. Until then a call to that slot gets ConnectionLost at
  once (503) rather than waiting: a worker serves every project, and a call waiting for one
  primary would hold up the projects on the others. Each primary is checked for attached replicas
  as under Sentinel, and a script sent to a primary that has one is followed by ``WAIT N`` in the
  same round trip, so a failover loses no acknowledged done either.

Commands are sent again (to a new primary, or to the slot's new owner) only when none of them
can have reached Redis (``ConnectionLost``, or a redirection: Redis checks the slot before it
runs anything); once they were sent, a broken connection or a timeout raises ``OutcomeUnknown``
(answered 503) and nothing is resent: a claim must not run twice. A Sentinel call waits at most
``FAILOVER_WAIT_S`` for a new primary, then raises ``ConnectionLost`` (503 too).

Admin paths get the matching redis-py client from ``admin_client``.
"""

from __future__ import annotations

import itertools
import time
from urllib.parse import parse_qs, quote, unquote, urlsplit

import hiredis
import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from tracker_core.infra.connection import ENCODING, ENCODING_ERRORS, HashReads
from tracker_core.infra.rawredis import ConnectionLost, OutcomeUnknown, RawRedis, RedisError


class NotAcknowledged(RedisError):
    """No replica confirmed a change in time: answered 503 so that the client retries."""


SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"
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
RETRY_PAUSE_S = 0.2  # between attempts on a Sentinel primary that could not be reached
REREAD_S = 0.05  # a cluster's slot map is read at most this often while a primary is out
REDIRECT_PAUSE_S = 0.05  # before a command TRYAGAIN or CLUSTERDOWN refused is sent again
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
        return {
            "kind": "sentinel",
            "password": password,
            "sentinels": hosts,
            "service": path[0],
            "db": int(path[1]) if len(path) == 2 else 0,
            **_wait_options(parts.query),
        }
    if parts.scheme == CLUSTER_SCHEME:
        password, hosts = _split_hosts(parts.netloc)
        if parts.path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0")
        return {"kind": "cluster", "password": password, "nodes": hosts, **_wait_options(parts.query)}
    return {"kind": "single", "url": url}


def _wait_options(query: str) -> dict:
    """?wait_replicas=N (1: a replica acknowledges each change; 0: never wait) and
    ?wait_timeout_ms=T (2000: how long, else 503)."""
    values = parse_qs(query)
    return {
        "wait_replicas": int(values.get("wait_replicas", ["1"])[0]),
        "wait_timeout_ms": int(values.get("wait_timeout_ms", ["2000"])[0]),
    }


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
    Replies are always decoded as tracker_core.infra.connection describes (one shape on every client).
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
        wait = self.replicas > 0 and any(_is_script(c) for c in commands)
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


class SentinelRedis(HashReads):
    """A RawRedis to the current primary of a Sentinel service, found again after a failover."""

    def __init__(self, url: str, spec: dict):
        self.url = url
        self.spec = spec
        self._primary: RawRedis | None = None
        self._acks = ReplicaAcks(spec)

    def _discover(self) -> RawRedis:
        errors = []
        for host, port in self.spec["sentinels"]:
            sentinel = RawRedis(_node_url(host, port, None), timeout_s=PROBE_TIMEOUT_S)
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
            primary = RawRedis(
                _node_url(addr[0], int(addr[1]), self.spec["password"], self.spec["db"]),
                connect_timeout_s=PROBE_TIMEOUT_S,
            )
            try:
                role = primary.execute_command("ROLE")
            except RedisError as exc:
                errors.append(f"primary {addr[0]}:{addr[1]}: {exc}")
                primary.close()
                continue
            if role and role[0] == "master":
                self._acks.note_role(role)
                return primary
            primary.close()
            errors.append(f"{addr[0]}:{addr[1]} is not a primary yet")
        raise ConnectionLost(
            f"no primary for Sentinel service {self.spec['service']!r}: " + "; ".join(errors)
        )

    def pipeline(self, commands) -> list:
        """Run COMMANDS on the primary; on a failover find the new primary and run them there."""
        deadline = time.monotonic() + FAILOVER_WAIT_S
        while True:
            try:
                # Discovery first: it reads the new primary's replicas, which decides the WAIT.
                if self._primary is None:
                    self._primary = self._discover()
                framed, role, wait = self._acks.frame(commands)
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
            time.sleep(RETRY_PAUSE_S)
        replies, acknowledged = self._acks.unframe(replies, role, wait)
        self._acks.check(acknowledged)
        return replies

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply

    def close(self) -> None:
        if self._primary is not None:
            self._primary.close()
            self._primary = None
        self._acks.checked_at = 0.0


# Replies after which a command was not run (Redis checks the slot before it runs anything).
_REDIRECTIONS = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN")


class ClusterRedis(HashReads):
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
                _node_url(addr[0], addr[1], self.spec["password"]), connect_timeout_s=PROBE_TIMEOUT_S
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
            probe = RawRedis(_node_url(addr[0], addr[1], self.spec["password"]), timeout_s=PROBE_TIMEOUT_S)
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
        calls of projects on the healthy ones (benchmarks/cluster_failover.py measured 3.9 s of
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
                text = _error_text(reply)
                if text and text.split(" ", 1)[0] in _REDIRECTIONS:
                    redirected.append(index)
                    redirect = redirect or text
                else:
                    replies[index] = reply
                    ran_script = ran_script or _is_script(command)
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

    def execute_command(self, *args):
        reply = self.pipeline((args,))[0]
        if isinstance(reply, hiredis.ReplyError):
            raise RedisError(str(reply))
        return reply

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
        self._acks.clear()
