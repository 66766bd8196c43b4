"""The command line: `python benchmarks/server_bench [--quick] [--part all|server|capacity|p99|anonymous] [--out DIR]`
(or `PYTHONPATH=benchmarks python -m server_bench`). `--part p99` runs only capacity's
constant-rate runs, for `--workers` (one count or several, compared in alternating rounds)."""

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
        choices=("all", "server", "capacity", "p99", "anonymous"),
        default="all",
        help="server: scenarios, Locust, data layer (server.json/.md, ~5 min); capacity: worker "
        "counts under bjoern and granian and p99 at a constant 70%% of the peak (capacity.json/.md, "
        "~6 min); all: both; p99: only the constant-rate runs, printed (~2 min with the defaults); "
        "anonymous: a warrior beside anonymous floods (anonymous_load.json/.md, ~2 min)",
    )
    parser.add_argument(
        "--workers",
        type=_counts,
        default=None,
        help="p99: bjoern worker counts, comma-separated (default: tracker serve's default)",
    )
    parser.add_argument(
        "--shares",
        type=_shares,
        default=None,
        help="p99: shares of the peak offered, in order (default: capacity's 0.7,0.5,0.7,0.3,0.7)",
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="p99: seconds of each constant-rate run")
    parser.add_argument("--rounds", type=int, default=1, help="p99: rounds over the worker counts")
    parser.add_argument(
        "--no-aof",
        dest="aof",
        action="store_false",
        help="p99: Redis without its AOF (no rewrite, no fork): whether the tail is persistence's",
    )
    options = parser.parse_args()
    if options.part == "p99":
        p99(options)
        return
    if options.part == "anonymous":
        from server_bench import anonymous_load

        anonymous_load.write(anonymous_load.run_anonymous(options.quick), options.out)
        return
    if options.part in ("all", "server"):
        server(options)
    if options.part in ("all", "capacity"):
        from server_bench import capacity

        results = capacity.run_capacity(CAPACITY_QUICK if options.quick else CAPACITY_FULL, options.quick)
        capacity.write(results, options.out)
        print(
            f"wrote {options.out / 'capacity.json'} and {options.out / 'capacity.md'} ({results['seconds_total']} s)"
        )


def _counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("worker counts are whole numbers from 1")
    return counts


def _shares(text: str) -> list[float]:
    shares = [float(part) for part in text.split(",")]
    if not shares or not all(0 < share <= 1 for share in shares):
        raise argparse.ArgumentTypeError("shares of the peak are above 0 and at most 1")
    return shares


def p99(options) -> None:
    from server_bench import capacity
    from tracker_api.server import default_workers

    shares = options.shares or capacity.latency_schedule(CAPACITY_FULL)
    runs = capacity.run_p99(
        options.workers or [default_workers()], shares, options.seconds, options.rounds, options.aof
    )
    print("\n".join(capacity.p99_table(runs)))


def server(options) -> None:
    plan = QUICK if options.quick else FULL
    results = run(plan, options.quick)
    write_with_history(results, options.out, "server", carried_history, report)
    for path in plot(results, options.out):
        print(f"wrote {path}")
    print(
        f"wrote {options.out / 'server.json'} and {options.out / 'server.md'} ({results['seconds_total']} s)"
    )
