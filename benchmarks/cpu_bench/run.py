"""The cpu case: every measurement of cases.py in order, one worker, then at full load, then
over a Unix socket; cpu.json keeps the history of earlier runs' headline figures."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from cpu_bench import cases
from cpu_bench.history import carried_history, headlines
from cpu_bench.report import report
from harness import Bench, case
from server_bench.plan import PROJECT, WRK_THREADS
from server_bench.run import versions
from server_bench.servers import start_hello, start_tracker
from tracker_api.server import default_workers
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import stop

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


def measure(plan: cases.Plan, bench: Bench) -> tuple[dict, dict]:
    """Run every case; return (cases, versions)."""
    # AOF off, as the issue measured: the figures are the work per request, not the disk's.
    redis_server = bench.redis(aof=False)
    scratch = bench.tmp
    server = None
    try:
        admin = AdminContext.from_url(redis_server.url)
        if admin.conn.config_get("appendonly")["appendonly"] != "no":
            raise RuntimeError("the benchmark's Redis kept AOF on")
        found = versions(admin)
        project_verbs.create(admin, PROJECT)
        rig = cases.Rig(plan, redis_server.url, admin, scratch)
        log = scratch / "servers.log"
        results = {}
        print("hello-world Falcon on bjoern, one worker", flush=True)
        server, port = start_hello(log, WORKERS)
        results["hello"] = cases.hello(rig, server.pid, port)
        stop(server)
        print("claim script alone (EVALSHA via scripts.claim)", flush=True)
        results["claim_script"] = cases.claim_script(rig)
        server, port = start_tracker(redis_server.url, log, WORKERS)
        for name in ("request", "done", "backfeed", "backfeed_fingerprint"):
            print(f"tracker {name}, one worker", flush=True)
            results[name] = getattr(cases, name)(rig, server.pid, port)
        stop(server)
        server = None
        results.update(request_over_unix_socket(plan, bench, log))
        results.update(full_load(plan, rig, log))
        return results, found
    finally:
        stop(server)


def full_load_bench(plan: cases.Plan, one_worker: cases.Rig) -> cases.Rig:
    """ONE_WORKER's Rig (its Redis, its item supply) with the full-load connections."""
    rig = cases.Rig(
        dataclasses.replace(plan, connections=plan.busy_connections),
        one_worker.redis_url,
        one_worker.admin,
        one_worker.scratch,
    )
    rig.supply = one_worker.supply  # it knows which names were used (done ones cannot come back)
    return rig


def full_load(plan: cases.Plan, one_worker: cases.Rig, log: Path) -> dict:
    """hello-world, `/request` and `/done` with BUSY_WORKERS workers under the plan's
    busy_connections (the same Redis, over TCP): CPU per request of a busy server."""
    rig = full_load_bench(plan, one_worker)
    results = {}
    for name, ping_url in (("hello_busy", None), ("hello_ping_busy", rig.redis_url)):
        what = " and one Redis PING a request" if ping_url else ""
        print(f"hello-world Falcon on bjoern{what}, {BUSY_WORKERS} workers, full load", flush=True)
        server, port = start_hello(log, BUSY_WORKERS, ping_url)
        try:
            results[name] = cases.hello(rig, server.pid, port, redis=bool(ping_url))
        finally:
            stop(server)
    server, port = start_tracker(rig.redis_url, log, BUSY_WORKERS)
    try:
        for name in ("request", "done"):
            print(f"tracker {name}, {BUSY_WORKERS} workers, full load", flush=True)
            results[f"{name}_busy"] = getattr(cases, name)(rig, server.pid, port)
    finally:
        stop(server)
    return results


def request_over_unix_socket(plan: cases.Plan, bench: Bench, log: Path) -> dict:
    """The `/request` case again, with one worker (request_unix) and at full load
    (request_unix_busy), the tracker reaching its own Redis over a Unix socket as `tracker run`'s
    embedded Redis is reached (the other cases use TCP loopback, as tracker nodes reach a Redis
    on another machine)."""
    redis_server = bench.redis("redis-unix", port=None, aof=False)
    server = None
    results = {}
    try:
        admin = AdminContext.from_url(redis_server.url)
        project_verbs.create(admin, PROJECT)
        rig = cases.Rig(plan, redis_server.url, admin, bench.tmp)
        busy = full_load_bench(plan, rig)
        for name, workers, measured in (
            ("request_unix", WORKERS, rig),
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


@case("cpu", report=report, history=carried_history, needs=("wrk",))
def run(bench: Bench) -> dict:
    """CPU per request beside req/s: worker CPU from /proc, Redis CPU from `INFO`."""
    plan = dataclasses.replace(QUICK if bench.quick else FULL, seconds=bench.size("seconds", FULL.seconds, 1))
    started = time.time()
    measured, found = measure(plan, bench)
    return {
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
