"""Start the real Redis topologies on loopback for tests: a Redis Cluster, and Sentinel with a replica.

Both are built from Debian's redis-server (sentinels run as ``redis-server CONF --sentinel``) in a
temporary directory, each process on its own free port.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import redis

from tracker_core import processes
from tracker_core.embedded import EmbeddedRedis
from tracker_core.processes import free_port


def _wait(predicate, what: str, timeout_s: float = 30.0) -> None:
    if not processes.wait_for(predicate, timeout_s, step_s=0.1):
        raise RuntimeError(f"timed out waiting for {what}")


def cluster_free_port() -> int:
    """A free port low enough for the cluster bus, which listens 10,000 ports higher."""
    while True:
        port = free_port()
        if port <= 55535:
            return port


class Cluster:
    """A Redis Cluster of N primaries and no replicas, formed with ``redis-cli --cluster create``."""

    def __init__(self, base_dir: Path, primaries: int = 3):
        self.nodes = [
            EmbeddedRedis(
                base_dir / f"node{i}",
                port=cluster_free_port(),
                extra=[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ],
            )
            for i in range(primaries)
        ]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self) -> Cluster:
        for node in self.nodes:
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
        clients = [redis.Redis(port=n.port) for n in self.nodes]
        _wait(lambda: all(c.cluster("info")["cluster_state"] == "ok" for c in clients), "the cluster to form")
        return self

    def owner_port(self, key: str) -> int:
        """Port of the primary that owns KEY's hash slot."""
        slot = redis.Redis(port=self.nodes[0].port).cluster("keyslot", key)
        for start, end, primary, *_ in redis.Redis(port=self.nodes[0].port).execute_command(
            "CLUSTER", "SLOTS"
        ):
            if start <= slot <= end:
                return int(primary[1])
        raise LookupError(key)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class SentinelGroup:
    """A primary, one replica and three sentinels watching service ``tracker``."""

    SERVICE = "tracker"

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        self.primary = EmbeddedRedis(base_dir / "primary", port=free_port())
        self.replica = EmbeddedRedis(
            base_dir / "replica", port=free_port(), extra=["--replicaof", "127.0.0.1", str(self.primary.port)]
        )
        self.sentinel_ports = [free_port() for _ in range(3)]
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
