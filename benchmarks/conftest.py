"""Make every `pytest benchmarks` run leave its figures in benchmarks/results/.

The JSON (pytest-benchmark's own format: machine, versions, commit, statistics of every
benchmark) goes to results/hot_paths.json unless --benchmark-json is given; a short table of
compiled-vs-twin ratios (tests parametrized with an id "compiled" and one starting "pure") goes to
results/hot_paths.md, because the ratio is what survives a noisy shared machine.

A run of some of the files (`pytest benchmarks/test_bloom_bench.py`) replaces only the figures of
the benchmarks it ran: the others are carried over from the previous file, each marked with the
run it came from (`carried_from`), so a partial run no longer wipes the rest.
"""

from __future__ import annotations

import json
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
        config._hot_paths_previous = _read_previous(JSON_PATH)  # before opening truncates it
        config.option.benchmark_json = JSON_PATH.open("wb")


def _read_previous(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def carry_over(previous: dict, output: dict, root: Path) -> dict:
    """OUTPUT with the benchmarks of PREVIOUS that this run did not run and that still exist
    (their file is there and still defines the test), each marked with the run it came from."""
    ran = {bench["fullname"] for bench in output["benchmarks"]}
    origin = {"datetime": previous.get("datetime"), "commit": (previous.get("commit_info") or {}).get("id")}
    carried = []
    for bench in previous.get("benchmarks", []):
        fullname = bench.get("fullname", "")
        if fullname in ran or not _still_defined(root, fullname):
            continue
        carried.append({**bench, "carried_from": bench.get("carried_from", origin)})
    output["benchmarks"] = sorted(output["benchmarks"] + carried, key=lambda b: b["fullname"])
    return output


def _still_defined(root: Path, fullname: str) -> bool:
    path, _, test = fullname.partition("::")
    try:
        return f"def {test.split('[')[0]}(" in (root / path).read_text()
    except OSError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_benchmark_generate_json(config, benchmarks, include_data, machine_info, commit_info):
    """Write the statistics without every raw timing: those make the file ~80 MB."""
    from pytest_benchmark import plugin

    output = plugin.pytest_benchmark_generate_json(config, benchmarks, False, machine_info, commit_info)
    output["command"] = " ".join(sys.argv)
    previous = getattr(config, "_hot_paths_previous", None)
    if previous:
        output = carry_over(previous, output, Path(str(config.rootpath)))
    config._hot_paths_output = output
    return output


def pytest_sessionfinish(session, exitstatus):
    output = getattr(session.config, "_hot_paths_output", None)
    if output is None or not output["benchmarks"]:
        return
    medians: dict[tuple[str, str], float] = {}
    carried: set[str] = set()
    for bench in output["benchmarks"]:
        if not bench.get("stats"):  # skipped or disabled
            continue
        parts = (bench.get("param") or "").split("-")
        kinds = [p for p in parts if p == "compiled" or p.startswith("pure")]
        if not kinds:  # not a compiled-vs-twin pair
            continue
        rest = "-".join(p for p in parts if p != kinds[0])
        case = bench["name"].split("[")[0] + (f"[{rest}]" if rest else "")
        medians[(case, "compiled" if kinds[0] == "compiled" else "pure")] = bench["stats"]["median"]
        if "carried_from" in bench:
            carried.add(case)
    rows = sorted({case for case, _ in medians})
    lines = [
        f"# Hot paths: compiled vs pure-Python twin ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
        "",
        "Median time per call; ratio = pure / compiled (higher means the compiled module helps more).",
        "Shared 2-core machine: absolute times are noisy, ratios less so. Rows marked * were not",
        "run this time: they are the previous run's (`carried_from` in hot_paths.json).",
        "",
        "| benchmark | compiled (µs) | pure (µs) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for case in rows:
        compiled, pure = medians.get((case, "compiled")), medians.get((case, "pure"))
        if compiled is None or pure is None:
            continue
        ratio = f"{pure / compiled:.1f}x" if compiled and pure else "-"
        mark = " *" if case in carried else ""
        lines.append(f"| {case}{mark} | {_micros(compiled)} | {_micros(pure)} | {ratio} |")
    REPORT_PATH.write_text("\n".join(lines) + "\n")


def _micros(seconds) -> str:
    return f"{seconds * 1e6:.3f}" if seconds is not None else "-"
