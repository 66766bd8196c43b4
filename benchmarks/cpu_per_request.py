"""CPU per request beside req/s (issue 16): worker CPU from /proc, Redis CPU from `INFO`.

Starts its own Redis (AOF off, loopback TCP), then measures with wrk keep-alive against ONE
bjoern worker: the hello-world Falcon app (the framework's floor), `/request` (multi=1),
`/done` of claimed items, backfeed of new items (Bloom filter at 1e-6); and the claim script
called directly (EVALSHA through scripts.claim) for its own cost. Writes cpu.json (figures,
machine, versions, command, date, and the history of earlier runs' figures) and cpu.md.

    .venv/bin/python benchmarks/cpu_per_request.py [--quick] [--seconds N] [--out DIR]

``--only backfeed`` (both filters) or ``--only backfeed_fingerprint`` runs only those rows,
``--rounds N`` times in alternating rounds (each round a new project: an empty filter and queue),
and prints their figures as one JSON line at the end instead of writing cpu.json and cpu.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_bench import cases
from cpu_bench.history import carried_history, headlines
from cpu_bench.report import report
from server_bench.plan import PROJECT, RESULTS, WRK_THREADS
from server_bench.results_file import write_with_history
from server_bench.run import machine, versions
from server_bench.servers import start_hello, start_tracker
from tracker_api.server import default_workers
from tracker_core.admin import projects
from tracker_core.admin.context import AdminContext
from tracker_core.embedded import EmbeddedRedis
from tracker_core.processes import free_port, stop

# ONE bjoern worker, so the CPU measured is one process's.
WORKERS = 1
# The full-load rows: `tracker serve`'s default worker count, enough connections to keep every
# worker and Redis busy. A core that idles between requests pays for going to sleep and waking
# up (on this VM several µs of system time a round trip), so one worker at part load measures
# more CPU per request than a busy server spends: the full-load rows are what a project's
# capacity is made of (Redis CPU per claim at full load is what caps one project).
BUSY_WORKERS = default_workers()
FULL = cases.Plan(seconds=45, probe_s=3)
QUICK = cases.Plan(seconds=1, probe_s=0, connections=4, backfeed_connections=2, busy_connections=16)
ONLY = {"backfeed": ("backfeed", "backfeed_fingerprint"), "backfeed_fingerprint": ("backfeed_fingerprint",)}
# What --only prints of each round of a backfeed case.
ONLY_FIGURES = (
    "redis_cpu_us_per_new_item",
    "bloom_script_us_per_new_item",
    "worker_cpu_us_per_new_item",
    "new_items_per_s",
    "new_items",
    "bloom_block",
    "queue_after",
    "redis_commands_per_unit",
    "non_2xx",
)


def measure(plan: cases.Plan, scratch: Path) -> tuple[dict, dict]:
    """Run every case; return (cases, versions)."""
    # AOF off, as the issue measured: the figures are the work per request, not the disk's.
    redis_server = EmbeddedRedis(scratch / "redis", port=free_port(), extra=["--appendonly", "no"]).start()
    server = None
    try:
        admin = AdminContext.from_url(redis_server.url)
        if admin.conn.config_get("appendonly")["appendonly"] != "no":
            raise RuntimeError("the benchmark's Redis kept AOF on")
        found = versions(admin)
        projects.create(admin, PROJECT)
        bench = cases.Bench(plan, redis_server.url, admin, scratch)
        log = scratch / "servers.log"
        results = {}
        print("hello-world Falcon on bjoern, one worker", flush=True)
        server, port = start_hello(log, WORKERS)
        results["hello"] = cases.hello(bench, server.pid, port)
        stop(server)
        print("claim script alone (EVALSHA via scripts.claim)", flush=True)
        results["claim_script"] = cases.claim_script(bench)
        server, port = start_tracker(redis_server.url, log, WORKERS)
        for name in ("request", "done", "backfeed", "backfeed_fingerprint"):
            print(f"tracker {name}, one worker", flush=True)
            results[name] = getattr(cases, name)(bench, server.pid, port)
        stop(server)
        server = None
        results.update(request_over_unix_socket(plan, scratch, log))
        results.update(full_load(plan, bench, log))
        return results, found
    finally:
        stop(server)
        redis_server.stop()


def full_load_bench(plan: cases.Plan, one_worker: cases.Bench) -> cases.Bench:
    """ONE_WORKER's Bench (its Redis, its item supply) with the full-load connections."""
    bench = cases.Bench(
        dataclasses.replace(plan, connections=plan.busy_connections),
        one_worker.redis_url,
        one_worker.admin,
        one_worker.scratch,
    )
    bench.supply = one_worker.supply  # it knows which names were used (done ones cannot come back)
    return bench


def full_load(plan: cases.Plan, one_worker: cases.Bench, log: Path) -> dict:
    """hello-world, `/request` and `/done` with BUSY_WORKERS workers under the plan's
    busy_connections (the same Redis, over TCP): CPU per request of a busy server."""
    bench = full_load_bench(plan, one_worker)
    results = {}
    for name, ping_url in (("hello_busy", None), ("hello_ping_busy", bench.redis_url)):
        what = " and one Redis PING a request" if ping_url else ""
        print(f"hello-world Falcon on bjoern{what}, {BUSY_WORKERS} workers, full load", flush=True)
        server, port = start_hello(log, BUSY_WORKERS, ping_url)
        try:
            results[name] = cases.hello(bench, server.pid, port, redis=bool(ping_url))
        finally:
            stop(server)
    server, port = start_tracker(bench.redis_url, log, BUSY_WORKERS)
    try:
        for name in ("request", "done"):
            print(f"tracker {name}, {BUSY_WORKERS} workers, full load", flush=True)
            results[f"{name}_busy"] = getattr(cases, name)(bench, server.pid, port)
    finally:
        stop(server)
    return results


def measure_only(plan: cases.Plan, scratch: Path, names: tuple, rounds: int) -> dict:
    """Only the backfeed cases NAMES, ROUNDS times in alternating rounds: {case: [figures...]}."""
    redis_server = EmbeddedRedis(scratch / "redis", port=free_port(), extra=["--appendonly", "no"]).start()
    server = None
    try:
        admin = AdminContext.from_url(redis_server.url)
        bench = cases.Bench(plan, redis_server.url, admin, scratch)
        server, port = start_tracker(redis_server.url, scratch / "servers.log", WORKERS)
        results: dict = {name: [] for name in names}
        for run in range(rounds):
            for name in names:
                print(f"tracker {name}, one worker, round {run + 1} of {rounds}", flush=True)
                figures = getattr(cases, name)(bench, server.pid, port, tag=f"-{run}")
                results[name].append(figures)
                # Each round starts from the same Redis: empty (a full run's queue is ~1 GB).
                admin.conn.flushall(asynchronous=False)
        return results
    finally:
        stop(server)
        redis_server.stop()


def only_summary(measured: dict) -> dict:
    """Per case: each round's ONLY_FIGURES, and the median of Redis's CPU per new item."""
    summary = {}
    for name, rounds in measured.items():
        summary[name] = {
            "redis_cpu_us_per_new_item_median": statistics.median(
                r["redis_cpu_us_per_new_item"] for r in rounds
            ),
            "rounds": [{key: r[key] for key in ONLY_FIGURES} for r in rounds],
            "commands": [r["commands"] for r in rounds],
        }
    return summary


def request_over_unix_socket(plan: cases.Plan, scratch: Path, log: Path) -> dict:
    """The `/request` case again, with one worker (request_unix) and at full load
    (request_unix_busy), the tracker reaching its own Redis over a Unix socket as `tracker run`'s
    embedded Redis is reached (the other cases use TCP loopback, as tracker nodes reach a Redis
    on another machine)."""
    redis_server = EmbeddedRedis(scratch / "redis-unix", port=None, extra=["--appendonly", "no"]).start()
    server = None
    results = {}
    try:
        admin = AdminContext.from_url(redis_server.url)
        projects.create(admin, PROJECT)
        bench = cases.Bench(plan, redis_server.url, admin, scratch)
        busy = full_load_bench(plan, bench)
        for name, workers, measured in (
            ("request_unix", WORKERS, bench),
            ("request_unix_busy", BUSY_WORKERS, busy),
        ):
            print(
                f"tracker request, {workers} worker(s), Redis on a Unix socket (tracker run's default)",
                flush=True,
            )
            server, port = start_tracker(redis_server.url, log, workers)
            results[name] = cases.request(measured, server.pid, port)
            stop(server)
            server = None
        return results
    finally:
        stop(server)
        redis_server.stop()


def write(results: dict, out: Path) -> None:
    """cpu.json and cpu.md in OUT, the previous cpu.json's figures moved into the history."""
    write_with_history(results, out, "cpu", carried_history, report)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="cpu_per_request", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a second per case (a smoke test)")
    parser.add_argument(
        "--seconds",
        type=int,
        help="measured whole seconds per case (wrk counts in seconds; default 45; quick 1)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where cpu.json and cpu.md go")
    parser.add_argument(
        "--only",
        choices=sorted(ONLY),
        help="run only these backfeed rows and print them (cpu.json and cpu.md are left alone)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --only: alternating rounds (default 1)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or (args.rounds > 1 and not args.only):
        parser.error("--rounds takes 1 or more, and more than 1 only with --only")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian package wrk; `make deps`)")
    plan = QUICK if args.quick else FULL
    if args.seconds:
        plan = dataclasses.replace(plan, seconds=args.seconds)
    started, machine_at_start = time.time(), machine()
    if args.only:
        with tempfile.TemporaryDirectory(prefix="tracker-cpu-") as scratch:
            measured = measure_only(plan, Path(scratch), ONLY[args.only], args.rounds)
        only = {
            "only": args.only,
            "seconds_per_case": plan.seconds,
            "load_average_at_start": machine_at_start["load_average_at_start"],
            "load_average_at_end": os.getloadavg(),
            "cases": only_summary(measured),
        }
        print(json.dumps(only), flush=True)
        return only
    with tempfile.TemporaryDirectory(prefix="tracker-cpu-") as scratch:
        measured, found = measure(plan, Path(scratch))
    results = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else " ".join(argv),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": args.quick,
        "machine": {**machine_at_start, "load_average_at_end": os.getloadavg()},
        "versions": found,
        "setup": {
            "workers": WORKERS,
            "full_load_workers": BUSY_WORKERS,
            "full_load_connections": measured["request_busy"]["connections"],
            "wrk_threads": WRK_THREADS,
            "seconds_per_case": plan.seconds,
            "probe_s": plan.probe_s,
            "redis": "redis-server on 127.0.0.1 TCP (request_unix: a Unix socket), AOF off, no snapshots",
            "note": "wrk, the worker and Redis share the machine's cores with other work",
        },
        "figures": headlines(measured),
        "cases": measured,
        "seconds_total": round(time.time() - started, 1),
    }
    write(results, args.out)
    for key, value in results["figures"].items():
        print(f"  {key:>38} {value}", flush=True)
    return results


if __name__ == "__main__":
    main()
