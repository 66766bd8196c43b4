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


def write_with_history(
    results: dict, out: Path, name: str, carried_history: Callable, report: Callable[[dict], str]
) -> tuple[Path, Path]:
    """Write OUT/NAME.json and OUT/NAME.md; the previous NAME.json's figures go into RESULTS'
    history by CARRIED_HISTORY(previous or None). Returns the two paths."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    previous = json.loads(path.read_text()) if path.exists() else None
    results["history"] = carried_history(previous)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    md = out / f"{name}.md"
    md.write_text(report(results))
    return path, md


def write_results(out: Path, name: str, results: dict, report: str | None = None) -> None:
    """Write OUT/NAME.json and, given REPORT, OUT/NAME.md; print the report (else the JSON)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    if report is not None:
        (out / f"{name}.md").write_text(report)
    print(report if report is not None else json.dumps(results, indent=2))


def run_header(script: str, argv: list[str] | None, load_average: tuple) -> dict:
    """What every result file says of its run: the command (SCRIPT, a path under benchmarks/,
    with ARGV, else this process's arguments), when, at which commit, on what, under what load."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "command": f"python {script} " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit or "unknown",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "load_average": load_average,
    }
