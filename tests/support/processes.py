"""Start, wait for and stop the real server and other processes the tests drive."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from support.paths import TRACKER_BIN
from tracker_core.embedded import free_port


def wait_for_port(port: int, timeout_s: float = 15.0, process=None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class LiveServer:
    def __init__(self, process, port):
        self.process = process
        self.port = port
        self.base = f"http://127.0.0.1:{port}"


def start_live_server(redis_url: str, workers: int = 2, extra_env: dict | None = None) -> LiveServer:
    port = free_port()
    env = dict(os.environ, TRACKER_REDIS_URL=redis_url, **(extra_env or {}))
    process = subprocess.Popen(
        [str(TRACKER_BIN), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    wait_for_port(port, process=process)
    return LiveServer(process, port)


def stop_process(process: subprocess.Popen, timeout_s: float = 10) -> None:
    """SIGTERM PROCESS and wait; SIGKILL it if it has not exited after TIMEOUT_S."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_live_server(server: LiveServer) -> None:
    stop_process(server.process)
