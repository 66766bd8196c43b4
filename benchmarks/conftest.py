"""Make every `pytest benchmarks` run leave its figures in benchmarks/results/.

The JSON (pytest-benchmark's own format: machine, versions, commit, statistics of every
benchmark) goes to results/hot_paths.json unless --benchmark-json is given; a short table of
compiled-vs-twin ratios (tests parametrized with an id "compiled" and one starting "pure") goes to
results/hot_paths.md, because the ratio is what survives a noisy shared machine.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

RESULTS = Path(__file__).with_name("results")
JSON_PATH = RESULTS / "hot_paths.json"
REPORT_PATH = RESULTS / "hot_paths.md"


def pytest_configure(config):
    # pytest-benchmark configures itself last (trylast), so setting its option here is enough.
    if getattr(config.option, "benchmark_json", "absent") is None and not config.getoption(
        "benchmark_disable", False
    ):
        RESULTS.mkdir(exist_ok=True)
        config.option.benchmark_json = JSON_PATH.open("wb")


@pytest.hookimpl(tryfirst=True)
def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):
    """Write the statistics without every raw timing: those make the file ~80 MB."""
    from pytest_benchmark import plugin

    output = plugin.pytest_benchmark_generate_json(config, benchmarks, False, machine_info, commit_info)
    output["command"] = " ".join(sys.argv)
    return output


def pytest_sessionfinish(session, exitstatus):
    bench_session = getattr(session.config, "_benchmarksession", None)
    if bench_session is None or not bench_session.benchmarks:
        return
    medians: dict[tuple[str, str], float] = {}
    for bench in bench_session.benchmarks:
        if not bench.stats:  # skipped or disabled
            continue
        parts = (bench.param or "").split("-")
        kinds = [p for p in parts if p == "compiled" or p.startswith("pure")]
        if not kinds:  # not a compiled-vs-twin pair
            continue
        rest = "-".join(p for p in parts if p != kinds[0])
        case = bench.name.split("[")[0] + (f"[{rest}]" if rest else "")
        medians[(case, "compiled" if kinds[0] == "compiled" else "pure")] = bench.stats.median
    rows = sorted({case for case, _ in medians})
    lines = [
        f"# Hot paths: compiled vs pure-Python twin ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        "Median time per call; ratio = pure / compiled (higher means the compiled module helps more).",
        "Shared 2-core machine: absolute times are noisy, ratios less so.",
        "",
        "| benchmark | compiled (µs) | pure (µs) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for case in rows:
        compiled, pure = medians.get((case, "compiled")), medians.get((case, "pure"))
        if compiled is None or pure is None:
            continue
        ratio = f"{pure / compiled:.1f}x" if compiled and pure else "-"
        lines.append(f"| {case} | {_micros(compiled)} | {_micros(pure)} | {ratio} |")
    REPORT_PATH.write_text("\n".join(lines) + "\n")


def _micros(seconds) -> str:
    return f"{seconds * 1e6:.3f}" if seconds is not None else "-"
