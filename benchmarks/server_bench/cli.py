"""The command line: `python benchmarks/server_bench [--quick] [--part all|server|capacity] [--out DIR]`
(or `PYTHONPATH=benchmarks python -m server_bench`)."""

from __future__ import annotations

import argparse
from pathlib import Path

import server_bench
from server_bench.plan import CAPACITY_FULL, CAPACITY_QUICK, FULL, QUICK, RESULTS
from server_bench.plots import plot
from server_bench.report import report
from server_bench.results_file import write_with_history
from server_bench.run import run
from server_bench.summary import carried_history


def main() -> None:
    parser = argparse.ArgumentParser(prog="server_bench", description=server_bench.__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="one concurrency level, 2 s runs, two 5 s Locust runs"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go")
    parser.add_argument(
        "--part",
        choices=("all", "server", "capacity"),
        default="all",
        help="server: scenarios, Locust, data layer (server.json/.md, ~5 min); capacity: worker "
        "counts under bjoern and granian and p99 at a constant 70%% of the peak (capacity.json/.md, "
        "~6 min); all: both",
    )
    options = parser.parse_args()
    if options.part in ("all", "server"):
        server(options)
    if options.part in ("all", "capacity"):
        from server_bench import capacity

        results = capacity.run_capacity(CAPACITY_QUICK if options.quick else CAPACITY_FULL, options.quick)
        capacity.write(results, options.out)
        print(
            f"wrote {options.out / 'capacity.json'} and {options.out / 'capacity.md'} ({results['seconds_total']} s)"
        )


def server(options) -> None:
    plan = QUICK if options.quick else FULL
    results = run(plan, options.quick)
    write_with_history(results, options.out, "server", carried_history, report)
    for path in plot(results, options.out):
        print(f"wrote {path}")
    print(
        f"wrote {options.out / 'server.json'} and {options.out / 'server.md'} ({results['seconds_total']} s)"
    )
