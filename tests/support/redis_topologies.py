"""Start the real Redis topologies on loopback for tests: a Redis Cluster, and Sentinel with a replica.

Both are built from Debian's redis-server (sentinels run as ``redis-server CONF --sentinel``) in a
temporary directory, each process on its own free port.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from tracker_core.infra import processes
from tracker_core.infra.embedded import EmbeddedRedis


def _wait(predicate, what: str, timeout_s: float = 30.0) -> None:
    if not processes.wait_for(predicate, timeout_s, step_s=0.1):
        raise RuntimeError(f"timed out waiting for {what}")


_handed_out: set[int] = set()


def node_port() -> int:
    """A port for a node of these topologies, with the cluster bus port 10,000 higher free too,
    both below the kernel's range for outgoing connections: a bus port inside it could be taken
    meanwhile by any client socket of the suite (a node then failed to start, 1 run in ~20 under
    load). Never one this process handed out before (a cluster's ports are all drawn before its
    first node binds one: two nodes on one port made a replica of its own primary), and each
    pytest-xdist worker draws from its own slice of the range."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    start, stop = _worker_slice(10_000, max(10_001, low - 10_000))
    while True:
        port = random.randrange(start, stop)
        if port not in _handed_out and _free(port) and _free(port + 10_000):
            _handed_out.add(port)
            return port


def _worker_slice(start: int, stop: int) -> tuple[int, int]:
    """[START, STOP), or on pytest-xdist's worker gwN of COUNT its Nth of COUNT equal slices."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count < 2:
        return start, stop
    size = (stop - start) // count
    index = int(worker[2:]) % count
    return start + index * size, start + (index + 1) * size


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Cluster:
    """A Redis Cluster of N primaries, each with REPLICAS replicas (0 or more), on loopback.

    The primaries are formed with ``redis-cli --cluster create`` (slots split evenly); then each
    replica meets them and follows its primary (``CLUSTER REPLICATE``), so which node follows
    which is known: replica ``replicas[i]`` follows ``nodes[i % primaries]``. ``nodes`` are the
    primaries as started, ``servers`` every redis-server. A failover swaps roles: ``owner_port``
    and ``primary_ports`` ask the cluster.
    """

    NODE_TIMEOUT_MS = 2000  # a primary that stops answering is failed over 2-4 s later

    def __init__(self, base_dir: Path, primaries: int = 3, replicas: int = 0):
        self.nodes = [self._server(base_dir / f"node{i}") for i in range(primaries)]
        self.replicas = [
            self._server(base_dir / f"node{i}r{j}") for j in range(replicas) for i in range(primaries)
        ]
        self.servers = self.nodes + self.replicas

    def _server(self, data_dir: Path) -> EmbeddedRedis:
        return EmbeddedRedis(
            data_dir,
            port=node_port(),
            extra=[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(self.NODE_TIMEOUT_MS),
                # A replica's first sync starts at once, not after Redis's 5 s wait for others.
                "--repl-diskless-sync-delay",
                "0",
                # As ansible/ deploys it: the other primaries serve their slots while one fails over.
                "--cluster-require-full-coverage",
                "no",
            ],
        )

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.servers)

    def start(self) -> Cluster:
        for node in self.servers:
            node.start()
        subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *(f"127.0.0.1:{n.port}" for n in self.nodes),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        for index, replica in enumerate(self.replicas):
            primary = self.nodes[index % len(self.nodes)]
            primary_id = redis.Redis(port=primary.port).cluster("myid")
            client = redis.Redis(port=replica.port)
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", primary.port)
            _wait(
                lambda c=client, p=primary_id: p in c.execute_command("CLUSTER", "NODES"),
                "a replica to meet its primary",
            )
            client.execute_command("CLUSTER", "REPLICATE", primary_id)
        for replica in self.replicas:
            self._wait_replica(replica.port)
        _wait(self._formed, "the cluster to form")
        return self

    def _formed(self) -> bool:
        """Every live node says ok, and sees every replica as one."""
        try:
            for node in self.live():
                nodes = redis.Redis(port=node.port, decode_responses=True).cluster("nodes")
                if sum("slave" in n["flags"] for n in nodes.values()) != len(self.replicas):
                    return False
        except redis.RedisError:
            return False
        return self.state_ok()

    def _wait_replica(self, port: int, timeout_s: float = 30.0) -> None:
        def synced() -> bool:
            info = redis.Redis(port=port).info("replication")
            return info.get("role") == "slave" and info.get("master_link_status") == "up"

        _wait(synced, f"the replica on {port} to sync", timeout_s)

    def live(self) -> list[EmbeddedRedis]:
        return [n for n in self.servers if n.process is not None and n.process.poll() is None]

    def state_ok(self, nodes=None) -> bool:
        """Whether every live node (or each of NODES) says cluster_state:ok."""
        try:
            return all(
                redis.Redis(port=n.port).cluster("info")["cluster_state"] == "ok"
                for n in (self.live() if nodes is None else nodes)
            )
        except redis.RedisError:
            return False

    def slot_owners(self, port: int | None = None) -> dict[int, int]:
        """The first slot of each range -> the port of its primary, as the node on PORT (the
        first live node) says."""
        client = redis.Redis(port=port or self.live()[0].port, socket_timeout=5)
        return {int(r[0]): int(r[2][1]) for r in client.execute_command("CLUSTER", "SLOTS")}

    def primary_ports(self) -> set[int]:
        return set(self.slot_owners().values())

    def owner_port(self, key: str) -> int:
        """Port of the primary that owns KEY's hash slot (as the first live node says)."""
        client = redis.Redis(port=self.live()[0].port)
        slot = client.cluster("keyslot", key)
        for start, end, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(primary[1])
        raise LookupError(key)

    def server(self, port: int) -> EmbeddedRedis:
        return next(n for n in self.servers if n.port == port)

    def replicas_of(self, port: int) -> list[int]:
        """Ports of the replicas attached to the primary on PORT (its ROLE)."""
        return [int(r[1]) for r in redis.Redis(port=port).execute_command("ROLE")[2]]

    def crash_primary(self, port: int, timeout_s: float = 30.0) -> int:
        """``kill -9`` the primary on PORT (no chance to save, as when a machine dies) and wait
        until a replica of it owns its slots and every live node says cluster_state:ok; return
        the new primary's port; ``killed_at`` is when the process was gone (monotonic). The old
        node stays down until ``restart(port)``."""
        ranges = self._ranges_of(port)
        node = self.server(port)
        node.process.kill()
        node.process.wait()
        self.killed_at = time.monotonic()
        return self._wait_taken_over(port, ranges, timeout_s)

    fail_over = crash_primary

    def hang_primary(self, port: int, timeout_s: float = 30.0) -> int:
        """``SIGSTOP`` the primary on PORT (a machine that stops answering but keeps its
        connections open) and wait until a replica owns its slots; the new primary's port. The
        old node stays stopped until ``resume(port)``."""
        ranges = self._ranges_of(port)
        os.kill(self.server(port).process.pid, signal.SIGSTOP)
        return self._wait_taken_over(port, ranges, timeout_s, [port])

    def resume(self, port: int, timeout_s: float = 30.0) -> None:
        """``SIGCONT`` a node hang_primary stopped and wait until it follows the new primary."""
        os.kill(self.server(port).process.pid, signal.SIGCONT)
        self._wait_replica(port, timeout_s)

    def _ranges_of(self, port: int) -> list[int]:
        ranges = [start for start, owner in self.slot_owners().items() if owner == port]
        if not ranges:
            raise ValueError(f"{port} is not a primary")
        return ranges

    def _wait_taken_over(self, port: int, ranges: list[int], timeout_s: float, hung=()) -> int:
        asked = [n for n in self.live() if n.port not in hung]

        def taken_over() -> bool:
            try:
                owners = self.slot_owners(asked[0].port)
                return all(owners.get(s, port) != port for s in ranges) and self.state_ok(asked)
            except redis.RedisError:
                return False

        _wait(taken_over, f"a replica to take over from {port}", timeout_s)
        return self.slot_owners(asked[0].port)[ranges[0]]

    def restart(self, port: int, timeout_s: float = 60.0) -> None:
        """Start the node on PORT again (its data directory and nodes.conf kept; TIMEOUT_S for
        loading its AOF, then for its sync): a primary that was failed over comes back as a
        replica of the node that took its slots."""
        self.server(port).start(timeout_s=timeout_s)
        self._wait_replica(port, timeout_s)
        _wait(self._formed, "the cluster to take the node back", timeout_s)

    def stop(self) -> None:
        for node in self.servers:
            node.stop()


class SentinelGroup:
    """A primary, one replica and three sentinels watching service ``tracker``."""

    SERVICE = "tracker"

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        self.primary = EmbeddedRedis(base_dir / "primary", port=node_port())
        self.replica = EmbeddedRedis(
            base_dir / "replica", port=node_port(), extra=["--replicaof", "127.0.0.1", str(self.primary.port)]
        )
        self.sentinel_ports = [node_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen] = []

    def url(self, **query) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
        return f"redis+sentinel://{hosts}/{self.SERVICE}/0{suffix}"

    def start(self) -> SentinelGroup:
        self.primary.start()
        self.replica.start()
        replica = redis.Redis(port=self.replica.port)
        _wait(lambda: replica.info("replication").get("master_link_status") == "up", "the replica to sync")
        for i, port in enumerate(self.sentinel_ports):
            directory = self.base_dir / f"sentinel{i}"
            directory.mkdir(parents=True, exist_ok=True)
            conf = directory / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"logfile {directory / 'sentinel.log'}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} 1000\n"
                f"sentinel failover-timeout {self.SERVICE} 10000\n"
                f"sentinel parallel-syncs {self.SERVICE} 1\n"
            )
            self.sentinels.append(processes.start(["redis-server", conf, "--sentinel"]))
        clients = [redis.Redis(port=p) for p in self.sentinel_ports]

        def all_see_the_replica():
            try:
                return all(
                    c.sentinel_slaves(self.SERVICE) and len(c.sentinel_sentinels(self.SERVICE)) == 2
                    for c in clients
                )
            except redis.RedisError:
                return False

        _wait(all_see_the_replica, "the sentinels to find the replica and each other")
        return self

    def current_primary_port(self) -> int:
        host, port = redis.Redis(port=self.sentinel_ports[0]).sentinel_get_master_addr_by_name(self.SERVICE)
        return int(port)

    def crash_primary(self) -> None:
        """Kill the primary without a chance to save: the way a machine dies."""
        self.primary.process.kill()
        self.primary.process.wait()

    def stop(self) -> None:
        for process in self.sentinels:
            processes.stop(process)
        self.replica.stop()
        self.primary.stop()
