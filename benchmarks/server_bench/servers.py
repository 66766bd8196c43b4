"""The servers under test, started and stopped through tracker_core.infra.processes: `tracker serve` and
the hello-world app, both with WORKERS bjoern workers on a free loopback port, and either app under
granian (the comparison with another maintained WSGI server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from server_bench.plan import BENCHMARKS, WORKERS
from tracker_api.server import worker_pids
from tracker_core.infra.processes import free_port, start, wait_for, wait_for_port


def start_tracker(redis_url: str, log_path: Path, workers: int = WORKERS) -> tuple[subprocess.Popen, int]:
    """`tracker serve` with WORKERS bjoern processes on a free loopback port."""
    port = free_port()
    tracker = Path(sys.executable).with_name("tracker")
    command = [str(tracker)] if tracker.exists() else [sys.executable, "-m", "tracker_api.cli"]
    process = start(
        command + ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
        env=dict(os.environ, TRACKER_REDIS_URL=redis_url),
        output=log_path,
    )
    _wait_for_workers(process, port, workers)
    return process, port


def _wait_for_workers(process: subprocess.Popen, port: int, workers: int) -> None:
    """Until PROCESS listens on PORT and has forked its WORKERS workers: the supervisor listens
    before it forks (each worker then opens its own SO_REUSEPORT socket), so an open port alone
    does not mean the workers exist yet, and whoever reads their CPU or pids would miss some."""
    wait_for_port(port, process)
    if not wait_for(lambda: len(worker_pids(process.pid)) >= workers, 10):
        raise RuntimeError(f"server {process.pid} forked fewer than {workers} workers within 10 s")


def start_hello(
    log_path: Path, workers: int = WORKERS, ping_url: str | None = None
) -> tuple[subprocess.Popen, int]:
    """The hello-world Falcon app (benchmarks/server_bench/hello_app.py), forked like the tracker; with
    PING_URL, one Redis PING a request."""
    port = free_port()
    argv = [sys.executable, BENCHMARKS / "server_bench" / "hello_app.py", str(port), str(workers)]
    process = start(argv + ([ping_url] if ping_url else []), output=log_path)
    _wait_for_workers(process, port, workers)
    return process, port


def start_granian(
    factory: str, log_path: Path, workers: int = WORKERS, env: dict | None = None
) -> tuple[subprocess.Popen, int]:
    """FACTORY of server_bench.granian_apps ("tracker" or "hello") under granian, WSGI, WORKERS
    processes of one Python thread each, as a bjoern worker serves one request at a time (the
    tracker's Engine holds one Redis connection and is not shared between threads)."""
    port = free_port()
    command = [
        str(Path(sys.executable).with_name("granian")),
        *("--interface", "wsgi", "--factory", "--http", "1", "--no-ws"),
        *("--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)),
        *("--blocking-threads", "1", "--runtime-threads", "1", "--backlog", "4096"),
        *("--log-level", "warning", "--working-dir", str(BENCHMARKS)),
        f"server_bench.granian_apps:{factory}",
    ]
    pythonpath = os.pathsep.join(filter(None, [str(BENCHMARKS), os.environ.get("PYTHONPATH")]))
    process = start(command, env=dict(os.environ, PYTHONPATH=pythonpath, **(env or {})), output=log_path)
    wait_for_port(port, process)
    return process, port


def post_json(url: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
