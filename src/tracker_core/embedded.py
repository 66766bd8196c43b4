"""A private redis-server that the tracker (or a test) starts and stops itself."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


class RedisServerError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedRedis:
    """Run redis-server with its data under DATA_DIR: AOF on (appendfsync everysec), loopback only.

    With ``port=None`` it listens on a Unix socket only (the embedded default: fastest, private);
    tests pass a free TCP port.
    """

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None,
                 extra: list[str] | None = None):
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.extra = extra or []
        self.process: subprocess.Popen | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir / "redis.sock"

    @property
    def url(self) -> str:
        if self.port is None:
            return f"unix://{self.socket_path}"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> "EmbeddedRedis":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RedisServerError("redis-server is not installed (Debian: apt-get install redis-server)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [binary, "--dir", str(self.data_dir), "--appendonly", "yes",
                "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
                "--protected-mode", "yes", "--loglevel", "warning",
                "--logfile", str(self.data_dir / "redis.log")]
        if self.port is None:
            args += ["--port", "0", "--unixsocket", str(self.socket_path), "--unixsocketperm", "700"]
        else:
            args += ["--port", str(self.port), "--bind", "127.0.0.1"]
        self.process = subprocess.Popen(args + self.extra, stdin=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if client.ping():
                    # AOF loading answers LOADING errors first; ping succeeds once data is ready.
                    return self
            except redis.exceptions.RedisError:
                pass
            if self.process.poll() is not None:
                raise RedisServerError(f"redis-server exited; see {self.data_dir / 'redis.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RedisServerError("redis-server did not answer in time")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            # SHUTDOWN flushes the AOF; a plain kill could lose the last second.
            redis.Redis.from_url(self.url).shutdown(nosave=False)
        except redis.exceptions.RedisError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
