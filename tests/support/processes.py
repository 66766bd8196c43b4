"""The real server as the tests start it: `tracker serve` over tracker_core.infra.processes.

Starting, waiting and stopping are tracker_core.infra.processes' own (re-exported here for the tests
that import them from support); this module only knows how the tests run the server.
"""

from __future__ import annotations

import os
import socket
import subprocess

from support.paths import ROOT, TRACKER_BIN
from support.raw_http import read_until_closed
from tracker_api.server import renderer_pid, worker_pids
from tracker_core.infra.processes import (
    alive,
    children_of,
    free_port,
    port_open,
    start,
    stop,
    stop_pids,
    wait_for,
    wait_for_line,
    wait_for_port,
)

__all__ = [
    "LiveServer",
    "ServerProcess",
    "alive",
    "children_of",
    "cmdline",
    "cpu_s",
    "descendants",
    "free_port",
    "port_open",
    "start",
    "start_demo",
    "start_live_server",
    "start_serve",
    "stop",
    "stop_live_server",
    "stop_pids",
    "stop_process",
    "wait_for",
    "wait_for_line",
    "wait_for_port",
    "worker_pids",
    "renderer_pid",
    "run_argv",
    "run_ports",
]

stop_process = stop


def cpu_s(pid: int) -> float:
    """User plus system CPU seconds PID has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmdline(pid: int) -> list[str]:
    """PID's command line, one word an entry; [] once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode().split("\0")
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """PID's children, their children and so on."""
    found, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        found += kids
        todo += kids
    return found


def start_serve(
    redis_url: str,
    *options: str,
    port: int | None = None,
    workers: int = 1,
    env: dict | None = None,
    preexec=None,
    **start_kwargs,
) -> tuple[subprocess.Popen, int]:
    """`tracker serve` on PORT (a free one by default) with WORKERS workers, once it listens."""
    port = free_port() if port is None else port
    process = start(
        [TRACKER_BIN, "serve", "--port", str(port), "--workers", str(workers), *options],
        env=dict(env if env is not None else os.environ, TRACKER_REDIS_URL=redis_url),
        preexec=preexec,
        **start_kwargs,
    )
    if start_kwargs.get("capture"):  # its ready line; the output is then read on into .lines
        wait_for_line(process, "serving on", timeout_s=15)
    wait_for_port(port, process)
    return process, port


def start_demo(directory, port: int) -> tuple[subprocess.Popen, dict]:
    """`tracker run --demo` on PORT (no live feed) in DIRECTORY, as `make run` runs it beside a
    reader of the README (its `.venv` linked there, no Redis URL or data directory from the
    environment), logging to run.log; the process and that environment."""
    (directory / ".venv").symlink_to(ROOT / ".venv")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRACKER_REDIS_URL", "TRACKER_DATA_DIR", "LOADTEST_BACKFEED_SECRET")
    }
    process = start(
        [ROOT / ".venv/bin/tracker", "run", "--demo", "--port", str(port), "--live-port", "0"],
        cwd=directory,
        env=env,
        output=directory / "run.log",
        new_session=True,
    )
    return process, env


def run_ports() -> tuple[int, int]:
    """Free ports for `tracker run`'s server and for its live feed: two different ones, the feed's
    not the default (port + 1 may belong to another test's server, and the page must be told)."""
    port, live_port = free_port(), free_port()
    while live_port in (port, port + 1):
        live_port = free_port()
    return port, live_port


def run_argv(options: list, port: int, live_port: int, *run_options: str) -> list:
    """`tracker OPTIONS run RUN_OPTIONS` with one worker on PORT and the live feed on LIVE_PORT."""
    return [TRACKER_BIN, *options, "run", *run_options, "--port", str(port), "--workers", "1",
            "--live-port", str(live_port)]  # fmt: skip


class ServerProcess:
    """`tracker serve` with its workers started, on a free port; OPTIONS go to `serve`."""

    def __init__(self, redis_url: str, *options: str, workers: int = 1, preexec_fn=None):
        self.process, self.port = start_serve(redis_url, *options, workers=workers, preexec=preexec_fn)
        wait_for(lambda: len(worker_pids(self.process.pid)) >= workers, 10)
        self.workers = worker_pids(self.process.pid)

    def stop(self) -> None:
        stop(self.process)

    def connect(self, timeout_s: float = 10.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s)

    def get(self, path: str = "/metrics") -> bytes:
        with self.connect() as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
            return read_until_closed(sock, 10)[0]


class LiveServer:
    def __init__(self, process, port, redis_url):
        self.process = process
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.redis_url = redis_url


def start_live_server(redis_url: str, workers: int = 2, extra_env: dict | None = None) -> LiveServer:
    env = dict(os.environ, **(extra_env or {}))
    process, port = start_serve(redis_url, "--host", "127.0.0.1", workers=workers, env=env)
    return LiveServer(process, port, redis_url)


def stop_live_server(server: LiveServer) -> None:
    stop(server.process)
