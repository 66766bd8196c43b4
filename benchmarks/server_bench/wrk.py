"""wrk runs (benchmarks/wrk/*.lua): one run, its figures from report.lua's JSON line."""

from __future__ import annotations

import json
import subprocess

from server_bench.plan import WRK_DIR, WRK_THREADS


def run_wrk(
    url: str, script: str, connections: int, duration_s: int, close: bool, script_args: tuple = ()
) -> dict:
    """Run wrk once; return its figures (report.lua's JSON line) with rates in per-second."""
    command = [
        "wrk",
        "-t",
        str(min(WRK_THREADS, connections)),
        "-c",
        str(connections),
        "-d",
        f"{duration_s}s",
        "--timeout",
        "5s",
        "-s",
        str(WRK_DIR / script),
    ]
    if close:
        command += ["-H", "Connection: close"]
    command.append(url)
    if script_args:
        command += ["--", *map(str, script_args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=duration_s + 60)
    lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout}")
    figures = json.loads(lines[-1][len("BENCH_JSON ") :])
    seconds = figures["duration_us"] / 1e6
    latency = figures.pop("latency_us")
    return {
        "requests": figures["requests"],
        "seconds": round(seconds, 3),
        "requests_per_s": round(figures["requests"] / seconds, 1),
        "latency_ms": {name: round(value / 1000, 3) for name, value in latency.items()},
        "non_2xx": figures["errors"]["status"],
        "socket_errors": {name: count for name, count in figures["errors"].items() if name != "status"},
    }
