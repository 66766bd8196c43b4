"""One whole benchmark run: Redis, the hello-world ceiling, the tracker's scenarios, Locust, the
data layer; returns the figures written to server.json."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata

from harness import Bench, results
from server_bench.data_layer import data_layer_ceiling
from server_bench.items import ItemSupply, claim_for_dones
from server_bench.meter import RedisMeter
from server_bench.plan import (
    AIMS,
    LOAD_SHARE,
    MULTI,
    PACE_MS,
    PROJECT,
    REFERENCE,
    WORKERS,
    WRK_THREADS,
    Plan,
)
from server_bench.servers import post_json, start_hello, start_tracker
from server_bench.summary import summarise
from server_bench.sweeps import BelowSaturation, best, sweep
from server_bench.warriors import BenchContext, locust_figures
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import stop
from tracker_core.items.engine import Engine


def machine() -> dict:
    """The harness's account of the machine, with the load now (the run's start)."""
    return {**results.machine(), "platform": platform.platform(), "load_average_at_start": os.getloadavg()}


def versions(admin: AdminContext) -> dict:
    found = {"python": platform.python_version(), "redis": admin.conn.info("server")["redis_version"]}
    for package in ("falcon", "bjoern", "hiredis", "redis", "orjson", "tracker"):
        try:
            found[package if package != "redis" else "redis-py"] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True)
    found["wrk"] = (wrk.stdout or wrk.stderr).splitlines()[0].split(" [")[0]
    found["git_commit"] = results.git_commit(short=False) or None
    return found


def run(plan: Plan, bench: Bench) -> dict:
    quick = bench.quick
    started = time.time()
    figures: dict = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": quick,
        "machine": machine(),
        "setup": {
            "tracker_workers": WORKERS,
            "wrk_threads": WRK_THREADS,
            "duration_s_per_run": plan.duration_s,
            "levels": list(plan.levels),
            "multi": MULTI,
            "redis": "redis-server on 127.0.0.1 TCP, AOF everysec",
            "note": "wrk, the tracker workers and Redis share the same 2 cores; "
            "the machine is shared with other work, so figures are noisy",
        },
        "reference_open_source_tracker": REFERENCE,
        "aims": AIMS,
    }
    scratch = bench.tmp
    redis_server = bench.redis()
    tracker = hello = None
    try:
        admin = AdminContext.from_url(redis_server.url)
        project_verbs.create(admin, PROJECT)
        engine = Engine(redis_server.url)
        supply = ItemSupply(admin, engine)
        meter = RedisMeter(admin)
        figures["versions"] = versions(admin)
        log = scratch / "servers.log"
        runs: list[dict] = []

        print("hello-world Falcon on bjoern (HTTP ceiling)", flush=True)
        hello, hello_port = start_hello(log)
        runs += sweep(
            "hello-world", f"http://127.0.0.1:{hello_port}/{PROJECT}/request", "request.lua", plan, None
        )
        stop(hello)

        tracker, port = start_tracker(redis_server.url, log)
        base = f"http://127.0.0.1:{port}/{PROJECT}"
        supply.top_up(100)
        status, body = post_json(f"{base}/request", {"downloader": "probe", "api_version": "2"})
        if status != 200 or b"item_name" not in body:
            raise RuntimeError(f"the tracker answered {status} {body!r} to a plain request")
        supply.recycle()
        # Requests per second each scenario may reach: a generous start, raised after every
        # run, so that todo never runs dry (a run that empties it measures 404s, not claims).
        rate_guess = {"request": 15_000.0, "multi": 10_000.0, "done": 12_000.0}

        def seed(scenario: str, items_per_request: int):
            def top_up():
                supply.top_up(int(rate_guess[scenario] * plan.duration_s * items_per_request * 1.4))

            return top_up

        def learner(scenario: str):
            def learn(run: dict) -> None:
                rate_guess[scenario] = max(rate_guess[scenario], run["requests_per_s"])

            return learn

        print("tracker /request", flush=True)
        runs += sweep(
            "request",
            f"{base}/request",
            "request.lua",
            plan,
            meter,
            seed("request", 1),
            1,
            supply,
            after_run=learner("request"),
        )
        print(f"tracker /multi={MULTI}/request", flush=True)
        runs += sweep(
            f"multi={MULTI}",
            f"{base}/multi={MULTI}/request",
            "request.lua",
            plan,
            meter,
            seed("multi", MULTI),
            MULTI,
            supply,
            after_run=learner("multi"),
        )

        print("tracker /done", flush=True)
        claims_file = scratch / "claims.tsv"

        def claim_for_next_done_run():
            count = int(rate_guess["done"] * plan.duration_s * 1.4)
            supply.top_up(count)
            claim_for_dones(engine, count, claims_file)

        runs += sweep(
            "done",
            f"{base}/done",
            "done.lua",
            plan,
            meter,
            claim_for_next_done_run,
            after_run=learner("done"),
            script_args=lambda connections: (claims_file, min(WRK_THREADS, connections)),
        )
        figures["done_note"] = (
            "each done run posts fresh claims (claimed through the engine "
            "just before); a run that outpaces them repeats dones (idempotent)"
        )

        peak = best(runs, "request", "keep-alive")
        low = min(
            (r for r in runs if r["scenario"] == "request" and r["connection"] == "keep-alive"),
            key=lambda r: r["connections"],
        )
        print(f"below saturation ({int(LOAD_SHARE * 100)}% of the keep-alive /request peak)", flush=True)
        below = BelowSaturation(f"{base}/request", peak["requests_per_s"], plan, meter, supply)
        figures["below_saturation"] = below.closed_loop()
        figures["below_saturation"]["method"] = (
            "wrk, keep-alive, the fewest back-to-back connections (1 s probes: 1, 2, 3, 4...) that "
            "reach about 70% of the peak. wrk2 (fixed arrival rate) is not packaged in Debian, "
            "and a Python rate-limited client cannot offer ~7k req/s on these 2 cores without "
            "taking the CPU the server needs. Closed loop: the load backs off when the server "
            "slows (coordinated omission), so this p99 is a best case; see the paced run."
        )
        figures["below_saturation_paced"] = below.paced(low["latency_ms"]["p50"])
        figures["below_saturation_paced"]["method"] = (
            f"wrk with many keep-alive connections, each pausing {PACE_MS} ms after every "
            "response (paced_request.lua, wrk's delay()), the count calibrated by short runs: "
            "the nearest wrk gets to a fixed arrival rate. Every process sleeps and wakes "
            "between requests here, which costs latency on a shared virtual machine."
        )

        print("Locust warriors (loadtest/, headless, Connection: close)", flush=True)
        context = BenchContext(base, redis_server.url, PROJECT, admin, supply, plan, scratch)
        locust = locust_figures(context)
        if locust is not None:
            figures["locust"] = locust

        stop(tracker)
        tracker = None
        print("data layer ceiling (pipelined EVALSHA, one client)", flush=True)
        figures["data_layer"] = data_layer_ceiling(plan, redis_server.url, engine, supply, meter)
        for row in figures["data_layer"]:
            print(
                f"  {row['mix']:>22} {row['calls_per_s']:>9.0f} calls/s  "
                f"evalsha {row['redis']['evalsha_us_per_call']} µs/call  "
                f"Redis CPU {row['redis']['cpu_us_per_request']} µs/call",
                flush=True,
            )
        figures["runs"] = runs
        figures["items_seeded"] = supply.seeded
        figures["seconds_seeding"] = round(supply.seed_seconds, 1)
        figures["seconds_recycling"] = round(supply.recycle_seconds, 1)
    finally:
        stop(tracker)
        stop(hello)
    figures["machine"]["load_average_at_end"] = os.getloadavg()
    figures["seconds_total"] = round(time.time() - started, 1)
    figures["summary"] = summarise(figures)
    return figures
