"""The capacity part of the benchmark (issue 16): `/request` at 1-8 workers under bjoern and
granian, the default worker count checked against them, and p99 at 70% of the peak at a constant
arrival rate. Writes capacity.json (with the history of earlier runs' figures) and capacity.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections import Counter
from importlib import metadata
from pathlib import Path

import tracker_core
from cpu_bench.meters import RedisCpu
from harness import Bench
from server_bench import constant_rate, summary
from server_bench.capacity_report import cores_busy
from server_bench.items import ItemSupply
from server_bench.plan import AIMS, LATENCY_CONNECTIONS, LOAD_SHARE, PROJECT, SERVERS, CapacityPlan
from server_bench.redis_aof import compact_aof
from server_bench.run import machine, versions
from server_bench.servers import start_tracker
from server_bench.worker_counts import ProcessTreeCpu, Sweep, best_count, medians
from server_bench.wrk import run_wrk
from tracker_api.server import WORKERS_PER_CORE, default_workers
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import AOF_REWRITE_MIN_SIZE_MB
from tracker_core.infra.processes import stop
from tracker_core.items.engine import Engine

# As benchmarks/wrk/request.lua sends them: 500 downloader names, seesaw-kit's body and agent.
HEADERS = {"Content-Type": "application/json", "User-Agent": "ArchiveTeam Warrior/0.10.3 Standalone"}
BODIES = [b'{"downloader":"warrior0-%d","api_version":"2","version":"20240101.01"}' % n for n in range(500)]
LOWER_SHARES = (0.5, 0.3)  # one run each beside the aim's share: where p99 turns up
# 1: connections taken in turn, 70% of the sweep's median peak; 2: the connection freed last
# first, 70% of a peak probed on the same server just before (constant_rate, latency_at_share);
# 3: short waits by select(), so an answer is read at once (2 slept through them: up to 2 ms late
# below 1,000 requests/s, nothing at the rates of the aim); 4: the AOF compacted after each run's
# item top-up, before the run (compact_aof).
LATENCY_METHOD_VERSION = 4
PEAK_PROBE_S = 3  # wrk keep-alive on the same server just before each constant-rate run
CLIENT_NICER_BY = 5  # the sender ahead of other work on the shared cores (where root): constant_rate

LATENCY_METHOD = (
    "Open loop at a constant arrival rate (server_bench/constant_rate.py): request i is due at "
    "t0 + i/rate and goes out on an idle keep-alive connection (64 open), or queues while none is "
    "idle; its latency counts from its due time, not from when it went out, which corrects for "
    "coordinated omission as wrk2 does. wrk2 is not packaged in Debian and wrk is closed loop "
    "(it stops sending while the server stalls); Locust's constant_throughput only paces each "
    "user's loop, so a slow answer still delays the next request and goes uncounted, and its "
    "gevent client costs more CPU per request than this one. The client is one Python thread on "
    "the same 2 cores (its CPU per request is shown), 5 nice levels ahead of the benchmark where allowed, so that it does "
    "not queue behind other work for its few per cent of a core; how late it sent (send lag) is part "
    "of the latency measured, so the figures are an upper bound on the server's own. Redis's AOF is "
    "rewritten after each run's item top-up and before the run, so that no rewrite the top-up "
    "brought falls in it; those the claims bring are counted (Redis forks). Redis runs as the "
    "tracker runs it (tracker_core.infra.embedded: AOF everysec, rewritten once it passes "
    f"{AOF_REWRITE_MIN_SIZE_MB} MB and has doubled), so at these rates a rewrite comes about "
    "every half minute."
)


def connections_per_process(server_port: int, wait_s: float = 1.0):
    """A `connected` hook for constant_rate.run: how many of the client's connections (given by
    their local ports) each server process accepted, most first, from `ss -tnp`. bjoern's workers
    share one listening socket and keep a keep-alive connection for its life, so this is fixed for
    the run; a connection not yet accepted after WAIT_S counts as held by none (a 0 at the end)."""

    def count(client_ports: list[int]) -> list[int]:
        wanted, holders = set(client_ports), {}
        deadline = time.monotonic() + wait_s
        while True:
            listing = subprocess.run(
                ["ss", "-tnpH", "state", "established", f"( sport = :{server_port} )"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            holders = {}
            for line in listing.splitlines():
                fields = line.split()
                if "pid=" not in line or len(fields) < 4:
                    continue
                peer = int(fields[3].rsplit(":", 1)[1])
                if peer in wanted:
                    holders[peer] = int(line.split("pid=", 1)[1].split(",", 1)[0])
            if len(holders) == len(wanted) or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        counts = sorted(Counter(holders.values()).values(), reverse=True)
        return counts + ([0] if len(holders) < len(wanted) else [])

    return count


def cpu_ticks() -> tuple[int, int]:
    """(all, stolen) CPU ticks of this machine so far, from /proc/stat's first line: stolen is
    time the hypervisor gave this VM's cores to other guests, which slows every process here
    without showing in any process's CPU time."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[7]


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the CPU time between BEFORE and AFTER (cpu_ticks) that was stolen."""
    ticks = after[0] - before[0]
    return round((after[1] - before[1]) / ticks, 4) if ticks > 0 else 0.0


def latency_schedule(plan: CapacityPlan) -> list[float]:
    """The share of the peak each constant-rate run offers: LATENCY_RUNS at LOAD_SHARE (the aim's),
    alternating with one each at the LOWER_SHARES (where the knee is), lowest last."""
    shares = [LOAD_SHARE] * plan.latency_runs
    for position, share in enumerate(LOWER_SHARES if plan.latency_runs > 1 else ()):
        shares.insert(2 * position + 1, share)
    return shares


def latency_at_share(
    plan: CapacityPlan,
    redis_url: str,
    admin,
    supply: ItemSupply,
    log: Path,
    workers: int,
    guess: float,
    shares: list[float] | None = None,
) -> list[dict]:
    """Constant-rate runs against `tracker serve` with WORKERS at SHARES of the peak (by default
    latency_schedule), each of the peak that wrk measured on the same server just before it (on a
    shared machine the peak of a minute ago may not be this minute's: 70% of it could be past
    saturation, or far below)."""
    redis = RedisCpu(admin.conn)
    process, port = start_tracker(redis_url, log, workers)
    path = f"/{PROJECT}/request"
    requests = [constant_rate.request_bytes("127.0.0.1", port, path, body, HEADERS) for body in BODIES]
    runs = []
    try:
        supply.top_up(int(guess * plan.warmup_s * 1.5) + 1_000)
        run_wrk(f"http://127.0.0.1:{port}{path}", "request.lua", plan.connections, plan.warmup_s, False)
        supply.recycle()
        for number, share in enumerate(latency_schedule(plan) if shares is None else shares):
            supply.top_up(int(guess * PEAK_PROBE_S * 1.5) + 1_000)
            probe = run_wrk(
                f"http://127.0.0.1:{port}{path}", "request.lua", plan.connections, PEAK_PROBE_S, False
            )
            supply.recycle()
            peak = probe["requests_per_s"]
            guess, target = max(guess, peak), share * peak
            supply.top_up(int(target * plan.latency_s * 1.3) + 1_000)
            # The top-up appends about 775 bytes of AOF an item, some 100 MB before a 15 s run at
            # the aim's rate: a rewrite it started would fall in the first moments of the run.
            # Compacted here, a rewrite during the run is one the claims themselves brought.
            if admin.conn.config_get("appendonly")["appendonly"] == "yes":
                compact_aof(admin.conn)
            tree = ProcessTreeCpu(process.pid)
            forks = admin.conn.info("stats")["total_forks"]
            redis.start()
            tree.start()
            ticks = cpu_ticks()
            figures = constant_rate.run(
                "127.0.0.1",
                port,
                requests,
                target,
                plan.latency_s,
                connections=LATENCY_CONNECTIONS,
                nicer_by=CLIENT_NICER_BY,
                connected=connections_per_process(port),
            )
            server_s, redis_s = tree.stop(), redis.stop()["cpu_s"]
            stolen = steal_share(ticks, cpu_ticks())
            # Redis forks during the run (an AOF rewrite: a child takes a core for 0.1-0.3 s of
            # it, the fork itself blocks Redis 1-7 ms) and the machine's load: what a tail can
            # come from besides the tracker.
            forks = admin.conn.info("stats")["total_forks"] - forks
            supply.recycle()
            answered = figures["requests"] or 1
            figures.update(
                run=number,
                share_offered=share,
                workers=workers,
                peak_requests_per_s=peak,
                share_of_peak=round(figures["requests_per_s"] / peak, 3),
                server_cpu_us_per_request=round(server_s * 1e6 / answered, 1),
                redis_cpu_us_per_request=round(redis_s * 1e6 / answered, 1),
                redis_forks=forks,
                connections_per_worker=figures.pop("connected"),
                load_average=round(os.getloadavg()[0], 2),
                cpu_steal_share=stolen,
            )
            runs.append(figures)
            lat, lag = figures["latency_ms"], figures["send_lag_ms"]
            print(
                f"  constant rate {figures['requests_per_s']:.0f}/s (target {target:.0f}): p50 {lat['p50']:.2f} "
                f"p90 {lat['p90']:.2f} p99 {lat['p99']:.2f} max {lat['max']:.2f} ms; client late p99 "
                f"{lag['p99']:.2f} ms; {figures['queued_for_a_connection']} found all "
                f"{LATENCY_CONNECTIONS} connections busy; CPU µs/req server "
                f"{figures['server_cpu_us_per_request']}, Redis {figures['redis_cpu_us_per_request']}, client "
                f"{figures['client_cpu_us_per_request']}: {cores_busy(figures):.2f} cores busy; {forks} Redis "
                f"fork(s); load {figures['load_average']:.2f}; {stolen:.1%} of the CPU stolen; connections per worker "
                f"{figures['connections_per_worker']}",
                flush=True,
            )
    finally:
        stop(process)
    return runs


def latency_summary(runs: list[dict]) -> dict:
    """Of the runs at LOAD_SHARE: the median run by p99 (its whole distribution), and every one's p99."""
    runs = [r for r in runs if r["share_offered"] == LOAD_SHARE]
    ordered = sorted(runs, key=lambda r: r["latency_ms"]["p99"])
    median_run = ordered[(len(ordered) - 1) // 2]
    return {
        "p99_ms_each_run": [r["latency_ms"]["p99"] for r in runs],
        "median_run": median_run["run"],
        "latency_ms": median_run["latency_ms"],
        "latency_from_send_ms": median_run["latency_from_send_ms"],
        "send_lag_ms": median_run["send_lag_ms"],
        "queued_share": round(median_run["queued_for_a_connection"] / max(1, median_run["requests"]), 4),
        "requests_per_s": median_run["requests_per_s"],
        "target_per_s": median_run["target_per_s"],
        "peak_requests_per_s": median_run["peak_requests_per_s"],
        "share_of_peak": median_run["share_of_peak"],
        "client_cpu_us_per_request": median_run["client_cpu_us_per_request"],
        "met": median_run["latency_ms"]["p99"] < AIMS["p99_ms_at_70pct"],
    }


def headline_figures(results: dict) -> dict:
    """What the history keeps of a run."""
    figures = {
        f"{row['server']}_{row['workers']}_requests_per_s": row["requests_per_s"]
        for row in results["medians"]
    }
    figures["default_workers"] = results["default"]["workers"]
    figures["p99_ms_at_70pct"] = results["latency"]["latency_ms"]["p99"]
    figures["rate_at_70pct"] = results["latency"]["requests_per_s"]
    figures["latency_method"] = LATENCY_METHOD_VERSION
    return figures


def carried_history(previous: dict | None) -> list[dict]:
    """server_bench's history, with the commit measured (a snapshot may differ from HEAD)."""
    if previous is None:
        return []
    return summary.carried_history(
        previous,
        lambda run: run["figures"],
        git_commit=previous.get("measured_commit") or previous["versions"].get("git_commit"),
        measured_source=previous.get("measured_source"),
    )


def run_capacity(plan: CapacityPlan, bench: Bench) -> dict:
    quick = bench.quick
    started = time.time()
    cores = os.cpu_count() or 1
    source = Path(tracker_core.__file__).resolve().parent.parent
    results: dict = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "quick": quick,
        "machine": machine(),
        # The tracker measured: the checkout's src/, or a snapshot put first on PYTHONPATH (made
        # with `git archive`, its commit in a COMMIT file beside src/).
        "measured_source": str(source),
        "measured_commit": (source.parent / "COMMIT").read_text().strip()
        if (source.parent / "COMMIT").exists()
        else None,
        "setup": {
            "counts": list(plan.counts),
            "rounds": plan.rounds,
            "seconds_per_cell": plan.seconds,
            "warmup_s": plan.warmup_s,
            "wrk_connections": plan.connections,
            "latency_s": plan.latency_s,
            "latency_runs": plan.latency_runs,
            "peak_probe_s": PEAK_PROBE_S,
            # Run under `nice -n -10` to put the benchmark ahead of other work on a shared machine.
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "granian": "--interface wsgi --blocking-threads 1 --runtime-threads 1 --http 1",
            "redis": "redis-server on 127.0.0.1 TCP, AOF everysec (as server.json)",
        },
    }
    scratch = bench.tmp
    redis_server = bench.redis()
    admin = AdminContext.from_url(redis_server.url)
    project_verbs.create(admin, PROJECT)
    supply = ItemSupply(admin, Engine(redis_server.url))
    results["versions"] = {**versions(admin), "granian": metadata.version("granian")}
    results["measured_commit"] = results["measured_commit"] or results["versions"]["git_commit"]
    log = scratch / "servers.log"
    print(
        f"worker counts {list(plan.counts)}, {plan.rounds} round(s), {plan.seconds} s a cell",
        flush=True,
    )
    runs = Sweep(plan, redis_server.url, admin, supply, log).run(SERVERS, hello_workers=cores)
    table = medians(runs)
    results["runs"], results["medians"] = runs, table
    results["best"] = {server: best_count(table, server) for server in SERVERS}
    workers = default_workers(cores)
    at_default = next(
        (r for r in table if r["server"] == "bjoern" and r["workers"] == workers),
        max((r for r in table if r["server"] == "bjoern"), key=lambda r: r["requests_per_s"]),
    )
    results["default"] = {
        "workers": workers,
        "workers_per_core": WORKERS_PER_CORE,
        "cores": cores,
        "measured_best_bjoern": results["best"]["bjoern"]["workers"],
        "peak_requests_per_s": at_default["requests_per_s"],
        "peak_measured_at_workers": at_default["workers"],
    }
    print(
        f"constant rate at {int(LOAD_SHARE * 100)}% of the peak just measured, {workers} bjoern workers",
        flush=True,
    )
    latency_runs = latency_at_share(
        plan, redis_server.url, admin, supply, log, workers, at_default["requests_per_s"]
    )
    results["latency"] = {"method": LATENCY_METHOD, **latency_summary(latency_runs)}
    results["latency_runs"] = latency_runs
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["seconds_total"] = round(time.time() - started, 1)
    results["figures"] = headline_figures(results)
    return results


def run_p99(
    bench: Bench, counts: list[int], shares: list[float], seconds: float, rounds: int, aof: bool = True
) -> list[dict]:
    """Only the constant-rate runs (`--part p99`): for each round and each worker count of COUNTS
    (rotated each round, so that a noisy minute does not fall on one count), a fresh `tracker
    serve`, then a run of SECONDS at each of SHARES of the peak probed just before it. Without AOF
    (`--no-aof`) Redis never forks: what is left of the tail is not persistence. Prints as it
    goes; writes nothing (the committed figures come from `--part capacity`)."""
    plan = CapacityPlan(
        counts=tuple(counts),
        rounds=rounds,
        seconds=PEAK_PROBE_S,
        warmup_s=1,
        connections=LATENCY_CONNECTIONS,
        latency_s=seconds,
        latency_runs=1,
    )
    runs: list[dict] = []
    scratch = bench.tmp
    redis_server = bench.redis(aof=aof)
    admin = AdminContext.from_url(redis_server.url)
    project_verbs.create(admin, PROJECT)
    supply = ItemSupply(admin, Engine(redis_server.url))
    for round_number in range(rounds):
        shift = round_number % len(counts)
        for workers in counts[shift:] + counts[:shift]:
            print(f"round {round_number}, {workers} bjoern workers", flush=True)
            for run in latency_at_share(
                plan,
                redis_server.url,
                admin,
                supply,
                scratch / "servers.log",
                workers,
                10_000,
                shares,
            ):
                runs.append(run | {"round": round_number})
    return runs


def p99_table(runs: list[dict]) -> list[str]:
    """Per worker count and share offered: the median p99 over its runs, and each run's."""
    lines = [
        "workers | share | runs | median p99 ms | p99 each run | median p50 ms | median req/s | median cores busy"
    ]
    for workers, share in sorted({(r["workers"], r["share_offered"]) for r in runs}):
        mine = [r for r in runs if r["workers"] == workers and r["share_offered"] == share]
        p99 = [r["latency_ms"]["p99"] for r in mine]
        lines.append(
            f"{workers} | {int(share * 100)}% | {len(mine)} | {statistics.median(p99):.2f} | "
            f"{', '.join(f'{x:.2f}' for x in p99)} | "
            f"{statistics.median(r['latency_ms']['p50'] for r in mine):.2f} | "
            f"{statistics.median(r['requests_per_s'] for r in mine):,.0f} | "
            f"{_median_cores(mine)}"
        )
    return lines


def _median_cores(runs: list[dict]) -> str:
    busy = [cores_busy(r) for r in runs]
    return "-" if None in busy else f"{statistics.median(busy):.2f}"
