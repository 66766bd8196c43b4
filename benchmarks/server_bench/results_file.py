"""A benchmark's result files: NAME.json (its figures) and NAME.md (the report), written by every
benchmark that keeps its figures in benchmarks/results/; the whole-server ones carry the
history of earlier runs in the JSON."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent


def write_with_history(
    results: dict, out: Path, name: str, carried_history: Callable, report: Callable[[dict], str]
) -> tuple[Path, Path]:
    """Write OUT/NAME.json and OUT/NAME.md; the previous NAME.json's figures go into RESULTS'
    history by CARRIED_HISTORY(previous or None). Returns the two paths."""
    path = out / f"{name}.json"
    previous = json.loads(path.read_text()) if path.exists() else None
    results["history"] = carried_history(previous)
    _write(out, name, results, report(results))
    return path, out / f"{name}.md"


def _write(out: Path, name: str, results: dict, report: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    if report is not None:
        (out / f"{name}.md").write_text(report)


def write_results(out: Path, name: str, results: dict, report: str | None = None) -> None:
    """Write OUT/NAME.json and, given REPORT, OUT/NAME.md; print the report (else the JSON)."""
    _write(out, name, results, report)
    print(report if report is not None else json.dumps(results, indent=2, ensure_ascii=False))


def git_commit(short: bool = True) -> str:
    """The commit the benchmarks run from (abbreviated when SHORT), or "" outside a checkout."""
    command = ["git", "-C", str(BENCHMARKS), "rev-parse", *(["--short"] if short else []), "HEAD"]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()


def run_header(script: str, argv: list[str] | None, load_average: tuple) -> dict:
    """What every result file says of its run: the command (SCRIPT, a path under benchmarks/,
    with ARGV, else this process's arguments), when, at which commit, on what, under what load."""
    return {
        "command": f"python {script} " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git_commit() or "unknown",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "load_average": load_average,
    }
