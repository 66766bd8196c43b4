"""The whole-server benchmark's parts, registered as harness cases: server (scenarios, Locust, the
data layer), capacity (worker counts, p99 at a constant 70% of the peak), anonymous_load (a
warrior beside anonymous floods) and p99 (only the constant-rate runs, printed)."""

from __future__ import annotations

from harness import Bench, case
from server_bench import anonymous_load, capacity
from server_bench.capacity_report import report as capacity_report
from server_bench.plan import CAPACITY_FULL, CAPACITY_QUICK, FULL, QUICK
from server_bench.plots import plot
from server_bench.report import report
from server_bench.run import run
from server_bench.summary import carried_history
from tracker_api.server import default_workers


@case("server", report=report, history=carried_history, needs=("wrk",))
def server(bench: Bench) -> dict:
    """The whole server under wrk and Locust: scenarios, the HTTP and data-layer ceilings."""
    results = run(QUICK if bench.quick else FULL, bench)
    bench.out.mkdir(parents=True, exist_ok=True)
    for path in plot(results, bench.out):
        print(f"wrote {path}")
    return results


@case("capacity", report=capacity_report, history=capacity.carried_history, needs=("wrk",))
def capacity_case(bench: Bench) -> dict:
    """Worker counts under bjoern and granian; p99 at a constant 70% of the peak."""
    return capacity.run_capacity(CAPACITY_QUICK if bench.quick else CAPACITY_FULL, bench)


@case("anonymous_load", report=anonymous_load.report, needs=("wrk",))
def anonymous(bench: Bench) -> dict:
    """A warrior's claims, quiet and beside anonymous floods."""
    return anonymous_load.run_anonymous(bench)


@case("p99", writes=False)
def p99(bench: Bench) -> dict:
    """Only capacity's constant-rate runs, printed (--set workers=2,4 aof=false ...).

    For each worker count in alternating rounds: whether the tail is persistence's (aof=false) or
    a worker count's."""
    runs = capacity.run_p99(
        bench,
        bench.size("workers", [default_workers()], quick=[1]),
        bench.size("shares", list(capacity.latency_schedule(CAPACITY_FULL)), quick=[0.5]),
        bench.size("seconds", 15.0, quick=1.0),
        bench.size("rounds", 1),
        bench.size("aof", True, quick=False),
    )
    print("\n".join(capacity.p99_table(runs)))
    return {"runs": runs}
