"""What the benchmark runs: the plans (full, quick), the fixed setup, the reference and the aims."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent
WRK_DIR = BENCHMARKS / "wrk"
RESULTS = BENCHMARKS / "results"
PROJECT = "bench"
WORKERS = 2
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
QUICK = Plan(
    duration_s=2, levels=(16,), data_layer_s=1.0, locust_users=(100,), locust_multi=(1, MULTI), locust_run_s=5
)
