"""The servers measured, each with ONE bjoern worker so its CPU is one process's: `tracker serve
--workers 1` and the hello-world Falcon app (benchmarks/hello_app.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from server_bench.plan import BENCHMARKS
from tracker_core.processes import free_port, start, wait_for_port

WORKERS = 1


def start_tracker(redis_url: str, log_path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    tracker = Path(sys.executable).with_name("tracker")
    command = [str(tracker)] if tracker.exists() else [sys.executable, "-m", "tracker_api.cli"]
    process = start(
        command + ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(WORKERS)],
        env=dict(os.environ, TRACKER_REDIS_URL=redis_url),
        output=log_path,
    )
    wait_for_port(port, process)
    return process, port


def start_hello(log_path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = start([sys.executable, BENCHMARKS / "hello_app.py", str(port), str(WORKERS)], output=log_path)
    wait_for_port(port, process)
    return process, port
