"""Run the Locust warriors headless in subprocesses and return their figures as a dict.

Locust brings gevent, whose monkey-patching must not leak into the caller (pytest, the benchmark
scripts), so this module imports neither and only starts processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracker_core.infra import processes

LOCUSTFILE = Path(__file__).resolve().with_name("locustfile.py")
LOCUST_BIN = Path(sys.executable).with_name("locust")


def run_headless(
    host: str,
    *,
    redis_url: str = "",
    project: str = "loadtest",
    seed_items: int = 0,
    users: int = 20,
    spawn_rate: float = 20,
    run_time_s: int = 20,
    workers: int = 0,
    multi: str = "1",
    download_time: str = "uniform:0.01,0.05",
    fail_share: float = 0.0,
    abandon_share: float = 0.0,
    backfeed_share: float = 0.0,
    backfeed_secret: str = "",
    retry_delay_s: float = 1.0,
    keep_alive: bool = False,
    min_irsr: float = 0.99,
    extra_args: tuple[str, ...] = (),
    csv_prefix: str | None = None,
    timeout_s: float | None = None,
    workdir: str | Path | None = None,
) -> dict:
    """Run RUN_TIME_S seconds of USERS warriors against HOST; return the final figures.

    WORKERS=0 runs one local Locust process; WORKERS=N runs a master and N worker processes on
    this machine (all bound to 127.0.0.1). With REDIS_URL and SEED_ITEMS the master seeds PROJECT
    and checks at the end that every item is accounted for.

    Returns the dict the locustfile writes with --figures-json: ``summary`` (irsr, rtt_ms
    {mean,p50,p95,p99,samples}, items_claimed_per_s, items_done_per_s, requests_per_s (of
    /request), counts, timeline: one row per second), ``accounting`` (or None), ``failures``
    (lines), ``passed``, ``thresholds``; plus ``exit_code``, ``command`` (the master's or local
    command line), ``log`` (its output's tail) and ``workdir`` (logs, and the CSV files when
    CSV_PREFIX is a bare name): WORKDIR if given, else a new temporary directory left for the
    caller to inspect or remove.
    """
    workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="loadtest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    figures_path = workdir / "figures.json"
    common = [str(LOCUST_BIN), "-f", str(LOCUSTFILE)]
    command = common + [
        "--headless",
        "--host",
        host,
        "--users",
        str(users),
        "--spawn-rate",
        str(spawn_rate),
        "--run-time",
        f"{run_time_s}s",
        "--only-summary",
        "--project",
        project,
        "--multi",
        multi,
        "--download-time",
        download_time,
        "--fail-share",
        str(fail_share),
        "--abandon-share",
        str(abandon_share),
        "--backfeed-share",
        str(backfeed_share),
        "--retry-delay-s",
        str(retry_delay_s),
        "--min-irsr",
        str(min_irsr),
        "--figures-json",
        str(figures_path),
    ]
    if backfeed_secret:
        command += ["--backfeed-secret", backfeed_secret]
    if redis_url:
        command += ["--tracker-redis-url", redis_url, "--seed-items", str(seed_items)]
    if keep_alive:
        command.append("--keep-alive")
    if csv_prefix:
        command += ["--csv", csv_prefix]
    worker_commands = []
    if workers:
        master_port = processes.free_port()
        command += [
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(master_port),
            "--expect-workers",
            str(workers),
        ]
        worker_commands = [
            common + ["--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)]
            for _ in range(workers)
        ]
    command += list(extra_args)
    env = dict(os.environ)
    env.pop("TRACKER_REDIS_URL", None)  # only what we pass: the env fallback could seed elsewhere
    log_path = workdir / "locust.log"
    worker_logs = [workdir / f"worker{i}.log" for i in range(len(worker_commands))]
    for path in [log_path, *worker_logs]:
        path.write_bytes(b"")  # this run's output only, in a reused WORKDIR too
    started = []
    try:
        master = processes.start(command, env=env, cwd=workdir, output=log_path)
        started.append(master)
        for worker_command, worker_log in zip(worker_commands, worker_logs, strict=True):
            started.append(processes.start(worker_command, env=env, cwd=workdir, output=worker_log))
        limit = timeout_s if timeout_s is not None else run_time_s + 60
        try:
            exit_code = master.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"locust did not finish within {limit} s; log in {log_path}") from None
        # The workers quit when the master does; give them a moment before stopping them.
        deadline = time.monotonic() + 15
        processes.wait_for(
            lambda: all(p.poll() is not None for p in started), max(0.0, deadline - time.monotonic())
        )
    finally:
        for process in started:
            processes.stop(process)
    log_text = log_path.read_text(errors="replace")
    if not figures_path.exists():
        raise RuntimeError(f"locust wrote no figures (exit {exit_code}):\n{log_text[-3000:]}")
    result = json.loads(figures_path.read_text())
    result.update(exit_code=exit_code, command=command, log=log_text[-5000:], workdir=str(workdir))
    return result


if __name__ == "__main__":
    print(json.dumps(run_headless(sys.argv[1]), indent=2))
