"""The one place the benchmarks (and the fault suite) start Redis: the tracker's own embedded
redis-server, on a loopback port and/or a Unix socket, and Redis Clusters built of the same."""

from __future__ import annotations

from pathlib import Path

from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.infra.processes import free_port

AOF_OFF = ("--appendonly", "no")


def start_redis(
    data_dir: Path,
    *,
    port: int | None = 0,
    unix: bool = False,
    aof: bool = True,
    extra: tuple[str, ...] | list[str] = (),
    timeout_s: float = 10.0,
) -> EmbeddedRedis:
    """A started redis-server with its data in DATA_DIR, as the tracker runs it (AOF everysec,
    rewrites past 256 MB) unless AOF is False. PORT 0 picks a free loopback port, None listens
    on the Unix socket only; UNIX also opens the socket beside the port (DATA_DIR/redis.sock).
    EXTRA comes last, so it overrides the defaults."""
    data_dir = Path(data_dir)
    options = [*([] if aof else AOF_OFF)]
    if unix and port is not None:
        options += ["--unixsocket", str(data_dir.resolve() / "redis.sock"), "--unixsocketperm", "700"]
    server = EmbeddedRedis(data_dir, port=free_port() if port == 0 else port, extra=[*options, *extra])
    return server.start(timeout_s=timeout_s)


def start_cluster(
    base_dir: Path,
    primaries: int,
    replicas: int = 0,
    aof: bool = True,
    extra: tuple[str, ...] | list[str] = (),
):
    """A started Redis Cluster of PRIMARIES primaries with REPLICAS replicas each, on loopback
    (the tests' topology: node timeout 2 s, full coverage not required, as ansible/ deploys it);
    EXTRA goes to every node."""
    from support.redis_topologies import Cluster  # on the path: harness/__init__.py

    cluster = Cluster(base_dir, primaries=primaries, replicas=replicas)
    for node in cluster.servers:
        node.extra += [*([] if aof else AOF_OFF), *extra]
    return cluster.start()
