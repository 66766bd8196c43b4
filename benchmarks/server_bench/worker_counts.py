"""`/request` at several worker counts, under bjoern and under granian, in alternating rounds.

A bjoern worker serves one request at a time and waits, idle, for each Redis round trip; more
workers than cores fill that wait with another request's Python. How many is best is measured
here: every cell (server, worker count) is started once and warmed up by a short unmeasured wrk
run; then each round measures a short slice of every cell with wrk keep-alive (request.lua):
req/s, p50/p99, and CPU per request of the server's processes (/proc, the whole process tree) and
of Redis (`INFO cpu`). Each round visits the cells in another order (counts rotated, servers
swapped), so a noisy minute on the shared machine does not fall on one cell; the report quotes
the median over rounds. Idle servers cost nothing while another is measured.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from cpu_bench.meters import RedisCpu, process_cpu_s
from server_bench.items import ItemSupply
from server_bench.plan import NEAR_BEST, PROJECT, CapacityPlan
from server_bench.servers import start_granian, start_hello, start_tracker
from server_bench.wrk import run_wrk
from tracker_core.infra.processes import children_of, stop


class ProcessTreeCpu:
    """utime+stime of a server process and everything under it (workers, granian's helpers)."""

    def __init__(self, root_pid: int):
        self.pids = [root_pid]
        for pid in self.pids:  # grows as it is walked: breadth first over the tree
            self.pids += children_of(pid)
        self.before = 0.0

    def total_s(self) -> float:
        total = 0.0
        for pid in self.pids:
            try:
                total += process_cpu_s(pid)
            except OSError:  # a worker restarted mid-run: its CPU is lost, the run says so
                pass
        return total

    def start(self) -> None:
        self.before = self.total_s()

    def stop(self) -> float:
        return self.total_s() - self.before


HELLO = " hello-world"  # SERVER + HELLO: the hello-world app under that server, the HTTP floor


def starter(server: str, redis_url: str, log: Path) -> Callable[[int], tuple]:
    """How to start the tracker (or, for SERVER + HELLO, the hello-world app) under SERVER with N
    workers: (process, port)."""
    name, hello = server.removesuffix(HELLO), server.endswith(HELLO)
    if name == "bjoern":
        return (lambda w: start_hello(log, w)) if hello else (lambda w: start_tracker(redis_url, log, w))
    env = {"TRACKER_REDIS_URL": redis_url}
    return lambda workers: start_granian("hello" if hello else "tracker", log, workers, env)


def cell_order(
    plan: CapacityPlan, servers: tuple[str, ...], round_number: int, hello_workers: int | None = None
) -> list[tuple[str, int]]:
    """The cells of ROUND_NUMBER: counts rotated by the round, servers swapped every round; then
    the hello-world app under each server at HELLO_WORKERS, if given."""
    shift = round_number % len(plan.counts)
    counts = plan.counts[shift:] + plan.counts[:shift]
    ordered = servers if round_number % 2 == 0 else tuple(reversed(servers))
    cells = [(server, count) for count in counts for server in ordered]
    return cells + ([(server + HELLO, hello_workers) for server in ordered] if hello_workers else [])


class Sweep:
    """The cells of the sweep against one Redis with one item supply: every server is started
    (and warmed up) once, then each round measures a short slice of each, so that every cell
    sees the same mix of the shared machine's noisy minutes."""

    def __init__(self, plan: CapacityPlan, redis_url: str, admin, supply: ItemSupply, log: Path):
        self.plan, self.redis_url, self.supply, self.log = plan, redis_url, supply, log
        self.redis = RedisCpu(admin.conn)
        self.rate_guess = 12_000.0  # raised after every run, so that todo never runs dry
        self.servers: dict[tuple[str, int], tuple] = {}  # cell -> (process, url, its process tree)

    def start(self, cells: list[tuple[str, int]]) -> None:
        for server, workers in cells:
            process, port = starter(server, self.redis_url, self.log)(workers)
            url = f"http://127.0.0.1:{port}/{PROJECT}/request"
            self.servers[server, workers] = (process, url, None)
            self.supply.top_up(int(self.rate_guess * self.plan.warmup_s * 1.5))
            run_wrk(url, "request.lua", self.plan.connections, self.plan.warmup_s, False)
            self.supply.recycle()
            # After the warm-up every worker has forked and connected.
            self.servers[server, workers] = (process, url, ProcessTreeCpu(process.pid))

    def stop(self) -> None:
        for process, _, _ in self.servers.values():
            stop(process)
        self.servers.clear()

    def measure(self, server: str, workers: int) -> dict:
        """One slice of one cell."""
        process, url, tree = self.servers[server, workers]
        self.supply.top_up(int(self.rate_guess * self.plan.seconds * 1.5))
        try:
            self.redis.start()
            tree.start()
            figures = run_wrk(url, "request.lua", self.plan.connections, self.plan.seconds, False)
            server_s = tree.stop()
            redis = self.redis.stop()
        finally:
            self.supply.recycle()
        if not server.endswith(HELLO):  # the hello-world claims nothing
            self.rate_guess = max(self.rate_guess, figures["requests_per_s"])
        requests = figures["requests"] or 1
        evalsha = redis["commands"].get("evalsha", {"calls": 0, "usec": 0})
        return {
            "server": server,
            "workers": workers,
            "processes_measured": len(tree.pids),
            "requests_per_s": figures["requests_per_s"],
            "requests": figures["requests"],
            "latency_ms": figures["latency_ms"],
            "non_2xx": figures["non_2xx"],
            "server_cpu_us_per_request": round(server_s * 1e6 / requests, 1),
            "redis_cpu_us_per_request": round(redis["cpu_s"] * 1e6 / requests, 1),
            "evalsha_us_per_call": round(evalsha["usec"] / evalsha["calls"], 1) if evalsha["calls"] else None,
        }

    def run(self, servers: tuple[str, ...], hello_workers: int | None = None) -> list[dict]:
        runs = []
        try:
            self.start(cell_order(self.plan, servers, 0, hello_workers))
            for round_number in range(self.plan.rounds):
                for server, workers in cell_order(self.plan, servers, round_number, hello_workers):
                    run = {"round": round_number, **self.measure(server, workers)}
                    runs.append(run)
                    print(
                        f"  round {round_number} {server:>7} {workers} workers "
                        f"{run['requests_per_s']:>8.0f} req/s  p50 {run['latency_ms']['p50']:.2f} "
                        f"p99 {run['latency_ms']['p99']:.2f} ms  server CPU "
                        f"{run['server_cpu_us_per_request']:.0f} µs/req  Redis "
                        f"{run['redis_cpu_us_per_request']:.0f}  non-2xx {run['non_2xx']}",
                        flush=True,
                    )
        finally:
            self.stop()
        return runs


MEDIAN_FIELDS = ("requests_per_s", "server_cpu_us_per_request", "redis_cpu_us_per_request")


def medians(runs: list[dict]) -> list[dict]:
    """Per (server, workers): the median over rounds of each figure, and the spread of the rate."""
    cells: dict[tuple[str, int], list[dict]] = {}
    for run in runs:
        cells.setdefault((run["server"], run["workers"]), []).append(run)
    table = []
    for (server, workers), measured in sorted(cells.items()):
        rates = [r["requests_per_s"] for r in measured]
        row = {"server": server, "workers": workers, "rounds": len(measured)}
        for name in MEDIAN_FIELDS:
            row[name] = round(statistics.median(r[name] for r in measured), 1)
        for name in ("p50", "p99"):
            row[f"{name}_ms"] = round(statistics.median(r["latency_ms"][name] for r in measured), 3)
        row["requests_per_s_min"], row["requests_per_s_max"] = min(rates), max(rates)
        # How much of the wall time a worker spends on the CPU: the rest it waits (for Redis, for
        # a core, for wrk). Well under 1 with one worker per core: that core idles meanwhile.
        row["worker_busy_share"] = round(
            statistics.median(r["requests_per_s"] * r["server_cpu_us_per_request"] / 1e6 for r in measured)
            / workers,
            2,
        )
        row["non_2xx"] = sum(r["non_2xx"] for r in measured)
        table.append(row)
    return table


def best_count(table: list[dict], server: str) -> dict:
    """SERVER's fewest workers whose median rate is within NEAR_BEST of its best median rate."""
    rows = sorted((r for r in table if r["server"] == server), key=lambda r: r["workers"])
    top = max(r["requests_per_s"] for r in rows)
    chosen = next(r for r in rows if r["requests_per_s"] >= NEAR_BEST * top)
    return {
        "workers": chosen["workers"],
        "requests_per_s": chosen["requests_per_s"],
        "best_requests_per_s": top,
    }
