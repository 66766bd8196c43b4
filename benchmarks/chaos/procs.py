"""The processes under test: a redis-server (or a Redis Cluster) and `tracker serve`, with the
faults applied to them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

from harness.redis import start_cluster, start_redis
from tracker_api.server import worker_pids
from tracker_core.infra.processes import (
    alive,
    port_open,
    start,
    stop,
    stop_pids,
    wait_for,
)

TRACKER_BIN = Path(sys.executable).with_name("tracker")
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")

__all__ = ["ChaosCluster", "ChaosRedis", "ChaosServer", "skewed_env", "wait_for"]


def skewed_env(offset: str, base: dict | None = None) -> dict:
    """An environment for a process whose clock runs OFFSET off ("+7h", "-7h", "+30s"):
    libfaketime (Debian's faketime) preloaded. The process and everything it forks read a wall
    clock OFFSET off; it moves their monotonic clock alike, which only ever meets itself."""
    if not LIBFAKETIME.exists():
        raise RuntimeError(f"{LIBFAKETIME} missing: install Debian's faketime (make deps)")
    env = dict(os.environ if base is None else base)
    env.update(LD_PRELOAD=str(LIBFAKETIME), FAKETIME=offset, FAKETIME_NO_CACHE="1")
    return env


def client_of(url: str) -> redis.Redis:
    """A redis-py client of one node that reads item names as the census wants them."""
    return redis.Redis.from_url(
        url, decode_responses=True, encoding_errors="surrogateescape", socket_timeout=30
    )


class ChaosRedis:
    """redis-server on PORT with its AOF in DATA_DIR; kill -9 and restart from the same AOF."""

    def __init__(self, data_dir: Path, port: int, maxmemory_mb: int, appendfsync: str):
        self.data_dir, self.port = data_dir, port
        # The extra arguments come last, so they override EmbeddedRedis's everysec.
        self.extra = [
            "--appendfsync",
            appendfsync,
            "--maxmemory",
            f"{maxmemory_mb}mb",
            "--maxmemory-policy",
            "noeviction",
        ]
        self.server = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        return self.server.process.pid

    def start(self) -> None:
        self.server = start_redis(self.data_dir, port=self.port, extra=self.extra, timeout_s=60)

    def kill9(self) -> None:
        self.server.process.kill()
        self.server.process.wait()

    def restart(self) -> None:
        """A new redis-server on the same port and data directory: it loads the AOF."""
        self.start()
        self.restarts += 1

    def stop_process(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def continue_process(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def client(self, key: str | None = None) -> redis.Redis:
        """A client of the one Redis (KEY: any key, as ChaosCluster.client takes one)."""
        return client_of(self.url)

    def stop(self) -> None:
        if self.server is None:
            return
        try:
            self.continue_process()
        except ProcessLookupError:
            pass
        self.server.stop()


class ChaosCluster:
    """A Redis Cluster of PRIMARIES primaries, each with a replica (tests/support/redis_topologies,
    node timeout 2 s), AOF on with APPENDFSYNC; the primary that owns KEY (the project's hash
    tag) is the one the faults hit and the one ``client()`` reads."""

    def __init__(self, data_dir: Path, appendfsync: str, key: str, primaries: int = 3):
        self.data_dir, self.primaries, self.appendfsync = data_dir, primaries, appendfsync
        self.cluster = None
        self.key = key
        self.restarts = 0  # old primaries started again, as replicas

    @property
    def url(self) -> str:
        return self.cluster.url

    def start(self) -> None:
        extra = ["--appendfsync", self.appendfsync]
        self.cluster = start_cluster(self.data_dir, self.primaries, replicas=1, extra=extra)

    def fail_over(self) -> dict:
        """kill -9 KEY's primary; wait until its replica owns the slot and the cluster is ok;
        start the old one again from its AOF and wait until it follows the new one (so a later
        failover has a replica to promote). Times from the kill (monotonic ``killed_at``)."""
        old = self.cluster.owner_port(self.key)
        new = self.cluster.crash_primary(old)
        killed_at = self.cluster.killed_at
        failover_s = time.monotonic() - killed_at
        self.cluster.restart(old)
        self.restarts += 1
        return {
            "old_primary": old,
            "new_primary": new,
            "killed_at": killed_at,
            "failover_s": round(failover_s, 3),
            "rejoined_as_replica_s": round(time.monotonic() - killed_at, 3),
        }

    def client(self, key: str | None = None) -> redis.Redis:
        """A client of the node that owns KEY (by default the project's first shard's) now."""
        return client_of(f"redis://127.0.0.1:{self.cluster.owner_port(key or self.key)}/0")

    def stop(self) -> None:
        self.cluster.stop()


class ChaosServer:
    """`tracker serve` with WORKERS bjoern processes on PORT; its stderr goes to LOG."""

    def __init__(
        self, redis_url: str, port: int, workers: int, log: Path, env: dict | None = None, options=()
    ):
        self.redis_url, self.port, self.workers, self.log = redis_url, port, workers, log
        self.env, self.options = env, tuple(options)
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout_s: float = 20.0) -> None:
        env = dict(os.environ if self.env is None else self.env, TRACKER_REDIS_URL=self.redis_url)
        argv = [
            TRACKER_BIN,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            *self.options,
        ]
        self.process = start(argv, env=env, output=self.log)
        self.starts += 1
        if not wait_for(
            lambda: (
                self.process.poll() is not None
                or len(self.worker_pids()) == self.workers
                and port_open(self.port)
            ),
            timeout_s,
        ):
            raise RuntimeError(f"tracker serve did not start on port {self.port}")
        if self.process.poll() is not None:
            raise RuntimeError(f"tracker serve exited with {self.process.returncode}; see {self.log}")

    def worker_pids(self) -> list[int]:
        """The bjoern workers: the children but the renderer of anonymous aggregates."""
        return worker_pids(self.process.pid)

    def kill_worker(self, pick) -> tuple[int, bool, float]:
        """kill -9 one worker (PICK chooses from the list); (pid, replaced, seconds to replace)."""
        workers = self.worker_pids()
        victim = pick(sorted(workers))
        os.kill(victim, signal.SIGKILL)
        started = time.monotonic()
        replaced = wait_for(
            lambda: victim not in self.worker_pids() and len(self.worker_pids()) == self.workers, 15
        )
        return victim, replaced, time.monotonic() - started

    def kill_parent(self, grace_s: float) -> list[int]:
        """kill -9 the parent; return the workers still alive GRACE_S seconds later (orphans).

        Orphans are then killed here (they are this run's own processes) so the restart can bind
        the port: the report names them, as a restart over a live orphan fails in production.
        """
        workers = self.worker_pids()
        self.process.kill()
        self.process.wait()
        wait_for(lambda: not any(alive(p) for p in workers), grace_s)
        orphans = [p for p in workers if alive(p)]
        stop_pids(orphans, timeout_s=0, sig=signal.SIGKILL)
        return orphans

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        workers = self.worker_pids()
        stop(self.process, timeout_s=15)
        stop_pids([p for p in workers if alive(p)], timeout_s=0, sig=signal.SIGKILL)
