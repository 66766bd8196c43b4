"""A private redis-server that the tracker (or a test) starts and stops itself."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path

import redis

from tracker_core.infra import processes

# Re-exported: callers older than processes.py import them from here.
from tracker_core.infra.processes import die_with_parent, free_port  # noqa: F401

log = logging.getLogger("tracker.redis")


class RedisServerError(RuntimeError):
    pass


def _redis_serving(pid: int, data_dir: Path) -> bool:
    """Whether PID is a live redis-server working in DATA_DIR (redis chdirs to its --dir), so a
    recycled pid is never taken for it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"redis-server" not in f.read():
                return False
        return Path(os.readlink(f"/proc/{pid}/cwd")) == data_dir
    except OSError:
        return False


# Redis rewrites its AOF once the file passes this size and has doubled since the last rewrite.
# A claim and its done append about 1.8 KB while the dataset barely grows, so with Redis's 64 MB
# a project smaller than that is rewritten (a fork, a child copying the dataset) every 30,000
# items: every 3 s at 10,000 items/s, 6.3 µs of rewrite CPU per item. At 256 MB: 0.6 µs, and a
# restart replays at most about 256 MB of AOF, under 3 s here (docs/performance.md, aof_rewrites).
# ansible/roles/redis/defaults/main.yml sets the same (redis_aof_rewrite_min_size_mb).
AOF_REWRITE_MIN_SIZE_MB = 256


class EmbeddedRedis:
    """Run redis-server with its data under DATA_DIR: AOF on (appendfsync everysec), loopback only.

    With ``port=None`` it listens on a Unix socket only (the embedded default: fastest, private);
    tests pass a free TCP port.
    """

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None, extra: list[str] | None = None):
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.extra = extra or []
        self.process: subprocess.Popen | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / "redis.pid"

    @property
    def url(self) -> str:
        if self.port is None:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> EmbeddedRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisServerError("redis-server is not installed (Debian: apt-get install redis-server)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_orphan()
        args = [
            binary,
            "--dir",
            str(self.data_dir),
            "--pidfile",
            str(self.pid_path),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--auto-aof-rewrite-min-size",
            f"{AOF_REWRITE_MIN_SIZE_MB}mb",
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--loglevel",
            "warning",
            "--logfile",
            str(self.data_dir / "redis.log"),
        ]
        if self.port is None:
            args += ["--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        else:
            args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        # Dies with its parent: a killed tracker must not leave Redis holding the data directory.
        self.process = process = processes.start(args + self.extra)
        client = redis.Redis.from_url(self.url)

        def answers() -> bool:
            # AOF loading answers LOADING errors first; ping succeeds once data is ready.
            try:
                return bool(client.ping())
            except redis.exceptions.RedisError:
                return process.poll() is not None

        ready = processes.wait_for(answers, timeout_s, step_s=0.02)
        client.close()  # no connection left behind: a restore refuses a Redis with clients
        if not ready:
            self.stop()
            raise RedisServerError("redis-server did not answer in time")
        if self.process.poll() is not None:
            raise RedisServerError(f"redis-server exited; see {self.data_dir / 'redis.log'}")
        log.info(
            "embedded redis-server %d at %s (its log: %s)",
            self.process.pid,
            self.url,
            self.data_dir / "redis.log",
        )
        return self

    def _stop_orphan(self, timeout_s: float = 15.0) -> None:
        """Stop a redis-server that a killed tracker left running on this data directory.

        Two servers on one directory would share (and corrupt) one AOF, and the second would
        delete the socket the first still serves. SHUTDOWN flushes the AOF; SIGTERM does too.
        """
        try:
            pid = int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return

        def gone() -> bool:
            return not _redis_serving(pid, self.data_dir)

        # It may be shutting down already (its parent died): give it a moment before SIGTERM.
        if processes.wait_for(gone, 2.0):
            return
        log.warning("stopping redis-server %d left running on %s by a tracker that died", pid, self.data_dir)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not processes.wait_for(gone, timeout_s - 2.0):
            raise RedisServerError(
                f"a redis-server (pid {pid}) still runs on {self.data_dir} and did not stop"
            )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            # SHUTDOWN flushes the AOF; a plain kill could lose the last second (SIGTERM flushes too).
            redis.Redis.from_url(self.url).shutdown(nosave=False)
        except redis.exceptions.RedisError:
            pass
        code = processes.stop(self.process, timeout_s=10)
        log.info("embedded redis-server %d stopped (exit code %s)", self.process.pid, code)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
