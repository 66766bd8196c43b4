"""A case's result files, benchmarks/results/NAME.json (its figures) and NAME.md (its report):
every file opens with the run's provenance, and the JSON carries the history of earlier runs."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent
RESULTS = BENCHMARKS / "results"
HISTORY_KEPT = 12  # earlier runs a result file keeps beside its figures (default history)


def git_commit(short: bool = True) -> str:
    """The commit the benchmarks run from (abbreviated when SHORT), or "" outside a checkout."""
    command = ["git", "-C", str(BENCHMARKS), "rev-parse", *(["--short"] if short else []), "HEAD"]
    return subprocess.run(command, capture_output=True, text=True, check=False).stdout.strip()


def source_changed() -> bool:
    """Whether src/ differs from the commit (figures of uncommitted code say so)."""
    status = subprocess.run(
        ["git", "-C", str(BENCHMARKS.parent), "status", "--porcelain", "--", "src"],
        capture_output=True,
        text=True,
        check=False,
    )
    return bool(status.stdout.strip())


def machine() -> dict:
    """What the figures were measured on: CPU model, cores, kernel, Python and Redis versions."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    redis_server = shutil.which("redis-server")
    redis_version = ""
    if redis_server:
        redis_version = subprocess.run(
            [redis_server, "--version"], capture_output=True, text=True
        ).stdout.strip()
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "redis": redis_version,
    }


def provenance(command: str, load_start: tuple, sizes: dict, quick: bool) -> dict:
    """What every result file says of its run: the command, when, at which commit (and whether
    src/ had uncommitted changes), on what, under what load (at the start and at the end), at
    which sizes."""
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git_commit() or "unknown",
        "src_changed": source_changed(),
        "machine": machine(),
        "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
        "sizes": sizes,
        **({"quick": True} if quick else {}),
    }


def default_history(previous: dict | None) -> list:
    """The previous file's run (its provenance and its ``headline`` figures) on top of its own
    history, newest first, HISTORY_KEPT at most."""
    if not previous:
        return []
    run = {key: previous[key] for key in ("date", "commit", "command", "load_average") if key in previous}
    for older in ("date_utc", "when"):  # files written before the harness
        if "date" not in run and older in previous:
            run["date"] = previous[older]
    if "headline" in previous:
        run["headline"] = previous["headline"]
    return ([run] if run else []) + list(previous.get("history", []))[: HISTORY_KEPT - 1]


def read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write(
    out: Path,
    name: str,
    results: dict,
    report: Callable[[dict], str] | None,
    history: Callable[[dict | None], list] | None,
) -> list[Path]:
    """Write OUT/NAME.json (RESULTS with the history of the file it replaces) and, given REPORT,
    OUT/NAME.md. Returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    results["history"] = (history or default_history)(read(path))
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    written = [path]
    if report is not None:
        written.append(out / f"{name}.md")
        written[-1].write_text(report(results))
    return written


def provenance_line(result: dict) -> str:
    """The opening of a report: the command, date, commit and the load at the start."""
    load = result.get("load_average", {}).get("start") or [0.0]
    changed = ", src/ changed" if result.get("src_changed") else ""
    return (
        f"`{result.get('command', '')}` on {result.get('date', '')} (commit {result.get('commit', '')}"
        f"{changed}; load average {load[0]:.2f} at the start)."
    )
