"""The pytest-benchmark micro-benchmarks (test_*_bench.py here): the compiled hot-path modules
against their pure-Python twins, and classification over 1,000 patterns. One case runs them all
through pytest-benchmark (its warm-up, rounds and statistics) and keeps the figures in
results/hot_paths.json and hot_paths.md; a run of some files (``--set files=test_bloom_bench.py``)
carries the other benchmarks' figures over from the previous file, each marked with its run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness import Bench, case
from harness.results import RESULTS, read
from micro.hot_paths import carry_over, classify_figures, report

HERE = Path(__file__).resolve().parent


@case("hot_paths", report=report)
def run(bench: Bench) -> dict:
    """Compiled modules against their pure twins (pytest-benchmark), and classification."""
    files = bench.size("files", ["test_protocol_bench.py", "test_bloom_bench.py", "test_classify_bench.py"])
    out = bench.tmp / "pytest-benchmark.json"
    quick = ["--benchmark-max-time=0.001", "--benchmark-min-rounds=1", "--benchmark-warmup=off"]
    command = [
        sys.executable,
        "-m",
        "pytest",
        *(str(HERE / name) for name in files),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--rootdir={HERE.parent.parent}",
        f"--benchmark-json={out}",
        *(quick if bench.quick else []),
    ]
    env = dict(os.environ, **({"BENCH_QUICK": "1"} if bench.quick else {}))
    subprocess.run(command, check=True, cwd=HERE.parent.parent, env=env)
    output = json.loads(out.read_text())
    for bench_row in output["benchmarks"]:
        bench_row.pop("data", None)  # every raw timing: ~80 MB
    output = carry_over(read(RESULTS / "hot_paths.json") or {}, output, HERE.parent.parent)
    classify = classify_figures(output["benchmarks"])
    return {
        "pytest_benchmark": {k: output[k] for k in ("machine_info", "commit_info", "version", "datetime")},
        "benchmarks": output["benchmarks"],
        "classify": classify,
        "headline": {"classify_names_per_s_compiled": classify.get("compiled", {}).get("names_per_s")},
    }
