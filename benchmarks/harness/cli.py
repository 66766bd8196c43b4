"""The command line: list the cases, run some or all of them, full size or --quick."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from harness import registry, results
from harness.bench import Bench

ENTRY = "PYTHONPATH=benchmarks python -m harness"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--quick", action="store_true", help="every case small: does it still run?")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    parser.add_argument(
        "--skip", default="", help="comma-separated case names to leave out of a run of all (not of --only's)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where result files go (default: benchmarks/results/; a scratch directory under --quick)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="extend",
        nargs="+",
        default=[],
        metavar="KNOB=VALUE",
        help="a case's size knob (e.g. --only limits --set items=20000): the bench.size calls of its module",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    cases = registry.load()
    names = [n for n in options.only.split(",") if n] or list(cases)
    unknown = [n for n in names + options.skip.split(",") if n and n not in cases]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(cases)}", file=sys.stderr)
        return 2
    if not options.only:
        names = [n for n in names if n not in options.skip.split(",")]
    if options.list:
        for name in names:
            print(f"{name:20} {cases[name].summary}")
        return 0
    if len(names) == 1:
        return run_one(cases[names[0]], options)
    return run_each(names, options, argv if argv is not None else sys.argv[1:])


def run_each(names: list[str], options: argparse.Namespace, argv: list[str]) -> int:
    """Each case in a process of its own (one case's leftovers never reach the next); a table of
    wall times at the end. Nonzero if any case failed."""
    passed_on = _without(argv, "--only", "--skip")
    rows, failed = [], []
    started = time.monotonic()
    for name in names:
        begun = time.monotonic()
        code = subprocess.run([sys.executable, "-m", "harness", "--only", name, *passed_on]).returncode
        outcome = {0: "ok", SKIPPED: "skipped"}.get(code, f"FAILED ({code})")
        rows.append((name, time.monotonic() - begun, outcome))
        if outcome.startswith("FAILED"):
            failed.append(name)
    print("\ncase                 wall s  outcome")
    for name, wall_s, outcome in rows:
        print(f"{name:20} {wall_s:6.1f}  {outcome}")
    print(f"{'all':20} {time.monotonic() - started:6.1f}  {len(failed)} failed")
    return 1 if failed else 0


SKIPPED = 3


def run_one(case: registry.Case, options: argparse.Namespace) -> int:
    """Run CASE in this process and write its result files. 0 done, SKIPPED, 1 failed."""
    missing = [program for program in case.needs if shutil.which(program) is None]
    if missing or (case.root and os.geteuid() != 0):
        reason = f"needs {', '.join(missing)}" if missing else "needs root"
        print(f"{case.name}: skipped ({reason})")
        return SKIPPED
    overrides = dict(item.split("=", 1) for item in options.overrides)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix=f"bench-{case.name}-") as tmp:
        out = options.out or (Path(tmp) / "results" if options.quick else results.RESULTS)
        bench = Bench(case.name, options.quick, Path(tmp), out, overrides)
        try:
            figures = case.run(bench)
        except Exception:
            traceback.print_exc()
            return 1
        finally:
            bench.close()
        unused = sorted(set(overrides) - set(bench.used))
        if unused:
            print(
                f"{case.name}: no knob {', '.join(unused)} (its knobs: {', '.join(bench.used)})",
                file=sys.stderr,
            )
        if not case.writes:
            return 0
        command = f"{ENTRY} --only {case.name}" + "".join(
            [" --quick" if options.quick else "", *(f" --set {shlex.quote(o)}" for o in options.overrides)]
        )
        header = results.provenance(command, load_start, bench.used, options.quick)
        written = results.write(out, case.name, {**header, **figures}, case.report, case.history)
        if options.quick and options.out is None:
            print(f"{case.name}: quick run, figures not kept ({', '.join(p.name for p in written)})")
        else:
            print(f"{case.name}: " + ", ".join(str(p) for p in written))
    return 0


def _without(argv: list[str], *flags: str) -> list[str]:
    """ARGV less each FLAG and its value (``--only a,b`` or ``--only=a,b``)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in flags:
            skip = True
            continue
        if any(arg.startswith(f"{flag}=") for flag in flags):
            continue
        kept.append(arg)
    return kept
