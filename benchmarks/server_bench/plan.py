"""What the benchmark runs: the plans (full, quick), the fixed setup, the reference and the aims."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracker_api.server import default_workers

BENCHMARKS = Path(__file__).resolve().parent.parent
WRK_DIR = BENCHMARKS / "wrk"
RESULTS = BENCHMARKS / "results"
PROJECT = "bench"
# The tracker's own --workers default (per core; capacity.md measures why), so that the figures
# are those of a server started without options.
WORKERS = default_workers()
WRK_THREADS = 2
MULTI = 10
PACE_MS = 2  # pause per connection in the 70% run (paced_request.lua)
LOAD_SHARE = 0.70  # the below-saturation latency run aims at this share of the peak rate
# The open-source universal-tracker on this machine class (issue 2).
REFERENCE = {"requests_per_s": 1000.0, "p99_ms": 200.0, "redis_cpu_us_per_request": 190.0}
AIMS = {"requests_per_s": 10000.0, "p99_ms_at_70pct": 5.0, "redis_cpu_us_per_claim": 30.0}


@dataclass(frozen=True)
class Plan:
    duration_s: int
    levels: tuple[int, ...]
    data_layer_s: float
    locust_users: tuple[int, ...] = ()
    locust_multi: tuple[int, ...] = ()
    locust_run_s: int = 0


FULL = Plan(
    duration_s=5,
    levels=(4, 16, 64),
    data_layer_s=3.0,
    locust_users=(100, 400),
    locust_multi=(1, MULTI),
    locust_run_s=15,
)
# --quick (make bench-quick, CI): every part once, too short to quote.
QUICK = Plan(
    duration_s=1, levels=(16,), data_layer_s=0.5, locust_users=(20,), locust_multi=(MULTI,), locust_run_s=2
)

# The worker-count sweep and the constant-rate latency run (capacity.py; capacity.json/.md).
WORKER_COUNTS = (1, 2, 3, 4, 6, 8)
SERVERS = ("bjoern", "granian")
# Within this share of the best median rate, the fewest workers win: each worker costs memory
# and a Redis connection, and on a noisy shared machine a 3% gap is not a difference.
NEAR_BEST = 0.97
LATENCY_CONNECTIONS = 64  # keep-alive connections the constant-rate client sends on


@dataclass(frozen=True)
class CapacityPlan:
    counts: tuple[int, ...]
    rounds: int  # each cell measured once per round; the report quotes the median over rounds
    seconds: int  # measured wrk time per cell and round
    warmup_s: int  # unmeasured wrk time per server once started (every worker forked, connected)
    connections: int  # keep-alive wrk connections: enough to keep 8 workers busy
    latency_s: float  # each constant-rate run
    latency_runs: int


# Many short slices rather than a few long ones: on a shared machine the noise comes in bursts
# of seconds to minutes, and the median over 8 rounds shrugs off the worst few.
CAPACITY_FULL = CapacityPlan(
    counts=WORKER_COUNTS, rounds=8, seconds=2, warmup_s=1, connections=64, latency_s=15, latency_runs=3
)
CAPACITY_QUICK = CapacityPlan(
    counts=(2,), rounds=1, seconds=1, warmup_s=1, connections=32, latency_s=1, latency_runs=1
)
