"""Instructions Redis executes per claim and per done script: a figure the machine's load cannot move.

On 2 shared cores, times per call move by 2x between minutes (see claim_cost_breakdown.py);
instructions do not. Each script (this tree's, and the one of a git revision) runs its body N
times inside one EVAL (the loop of claim_cost_breakdown.py) on a redis-server under valgrind's
callgrind, which counts every instruction the server executes; the same run with a loop of 0
gives what the setting-up cost, and the difference over N is the script body's instructions
per run (the EVALSHA call itself, reading the 22 keys off the socket, is not in it: it is the
same for both). usec figures come from the same run of claim_cost_breakdown.py.

    .venv/bin/python benchmarks/claim_cost_instructions.py [--before REV] [--runs N] [--label TEXT]

Writes benchmarks/results/claim_cost_instructions.json. About ten seconds per script and variant (valgrind).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import redis
from server_bench.results_file import git_commit

# Run as a script, this file's directory is on sys.path: the loop is claim_cost_breakdown's.
from callgrind_redis import CALL_TIMEOUT_S, count_instructions
from claim_cost_breakdown import DONE_FLOORS, LOOP, VARIANTS, client, loop_call, script_at, variant
from tracker_core import scripts
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items.engine import Engine
from tracker_core.offload.demand import QUEUE_BITS
from tracker_core.scripts.constants import REFILL_WATCH_FIELD

RESULTS = Path(__file__).with_name("results") / "claim_cost_instructions.json"
KEEP_PROFILE = None  # a path: the last callgrind profile is copied there (callgrind_annotate)


def instructions(chosen: scripts.Script, runs: int, dones: bool, loop: bool, shape=None) -> int:
    """Instructions redis-server executed in all: the setting-up for RUNS, then (LOOP) the loop.
    SHAPE(admin, project), when given, reshapes the project right after it is created."""

    def work(url: str) -> None:
        conn = redis.Redis.from_url(url, decode_responses=True, socket_timeout=CALL_TIMEOUT_S)
        admin = AdminContext.from_url(url)
        project_verbs.create(admin, "bench")
        if shape is not None:
            shape(admin, "bench")
        engine = Engine(url)
        k = engine.keys("bench")
        names = [f"https://example.com/i/{i}?q=%20x#f" for i in range(runs)]
        admin.conn.sadd(k.todo, *names)
        now_ms = engine._now_ms()
        if dones:
            for i in range(runs):
                assert engine.claim("bench", *client(i), 1)[0] == 200
            keys, argv = loop_call(engine, k, now_ms, dones=True)
            items = f"redis.call('ZRANGE', KEYS[2], 0, {runs - 1})"
            source = LOOP % (chosen.source, items, "reply[3] ~= 1")
        else:
            # A warm-up claim: the uniques the engine then knows are known in the loop too.
            keys, argv = loop_call(engine, k, now_ms, dones=False)
            source = LOOP % (chosen.source, "nil", "false")
        n = runs if loop else 0
        assert conn.eval(source, len(keys), *keys, *argv, n) == n  # no socket timeout

    # The loop (EVAL), not the setting-up (EVALSHA).
    return count_instructions("evalCommand", work, KEEP_PROFILE)


def watching_todo(admin: AdminContext, project: str) -> None:
    """PROJECT as while segments of todo wait on disk: claims read its refill watch and count
    todo (offload.demand); BELOW 0, so no claim of the loop asks (a claim that asks writes)."""
    admin.conn.hset(admin.keys(project).settings, REFILL_WATCH_FIELD, str(0 * 16 + QUEUE_BITS["todo"]))


def per_run(chosen: scripts.Script, runs: int, dones: bool, shape=None) -> int:
    """Instructions one run of CHOSEN's body costs: RUNS of them in one loop, less the same
    setting-up with none, over RUNS (see the module docstring)."""
    total = instructions(chosen, runs, dones, loop=True, shape=shape)
    base = instructions(chosen, runs, dones, loop=False, shape=shape)
    return round((total - base) / runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", nargs="*", default=["fa85741"], help="git revisions to compare with")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--label", default="now")
    parser.add_argument("--scripts", nargs="*", default=["claim", "done"])
    parser.add_argument(
        "--breakdown",
        nargs="*",
        default=[],
        help="'now' or git revisions: the claim script of each against copies with one part cut out",
    )
    parser.add_argument(
        "--refill-watch",
        action="store_true",
        help="also the claim with a refill watch set (segments of todo wait on disk; it never asks)",
    )
    parser.add_argument(
        "--done-floors",
        action="store_true",
        help="the done script against the least any done must run (claim_cost_breakdown.DONE_FLOORS)",
    )
    args = parser.parse_args()
    result = {}
    breakdown = {}
    done_floors = {}
    if args.done_floors:
        real = scripts.SCRIPTS["done"]
        for name in ["full", *DONE_FLOORS]:
            done_floors[name] = per_run(variant(real, name), args.runs, True)
            print("done floor", name, done_floors[name], flush=True)
    for rev in args.breakdown:
        real = scripts.SCRIPTS["claim"] if rev == "now" else script_at(rev, "claim")
        costs = {}
        for name in ["full", *VARIANTS, "floor"]:
            costs[name] = per_run(variant(real, name), args.runs, False)
            print("breakdown", rev, name, costs[name], flush=True)
        breakdown[rev] = {
            "instructions_per_run": costs,
            "part_instructions": {n: costs["full"] - v for n, v in costs.items() if n != "full"},
            "parts": {n: VARIANTS[n][0] for n in VARIANTS},
        }
    for name in args.scripts:
        dones = name == "done"
        variants = {"now": scripts.SCRIPTS[name]}
        variants.update({f"at {rev}": script_at(rev, name) for rev in args.before})
        counts = {}
        for label, chosen in variants.items():
            counts[label] = per_run(chosen, args.runs, dones)
            print(name, label, counts[label], flush=True)
        if name == "claim" and args.refill_watch:
            counts["now, refill_watch set"] = per_run(variants["now"], args.runs, dones, shape=watching_todo)
            print(name, "now, refill_watch set", counts["now, refill_watch set"], flush=True)
        result[name] = counts
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data["what"] = (
        "instructions redis-server executes per run of the script body (valgrind callgrind; one "
        "EVAL running the body N times, minus the same setting-up with 0 runs); claim: multi=1 from "
        "todo, a known client; done: one item, one domain"
    )
    data.setdefault("runs", {})[args.label] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git_commit(short=False),
        "runs": args.runs,
        "instructions_per_run": result,
        "claim_breakdown": breakdown,
        "done_floors": done_floors,
        "machine": platform.platform(),
    }
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(data))


def markdown(data: dict) -> str:
    lines = [
        "# Claim and done scripts: instructions per run",
        "",
        "Made by `.venv/bin/python benchmarks/claim_cost_instructions.py`: " + data["what"] + ".",
        "Deterministic (the machine's load does not move it, unlike the usec of claim_cost.md).",
        "",
    ]
    for label, run in data["runs"].items():
        lines += [f"## {label} ({run['when']}, commit {run['commit'][:10]}, {run['runs']} runs)", ""]
        for script, per_run in run["instructions_per_run"].items():
            lines.append(f"- {script}: " + ", ".join(f"{v:,} ({k})" for k, v in per_run.items()))
        for rev, b in run.get("claim_breakdown", {}).items():
            full = b["instructions_per_run"]["full"]
            lines += [
                "",
                f"Claim script at {rev}: {full:,} instructions a claim; what each part costs",
                "",
                "| part | instructions | share |",
                "| --- | --- | --- |",
            ]
            for n, v in b["part_instructions"].items():
                what = b["parts"].get(n, "all but HMGET settings + SPOP todo (the floor)")
                lines.append(f"| {what} | {v:,} | {100 * v / full:.1f}% |")
        floors = run.get("done_floors") or {}
        if floors:
            lines += [
                "",
                f"Done script: {floors['full']:,} instructions a done of one claimed item; the least any "
                "done must run (claim_cost_breakdown.DONE_FLOORS)",
                "",
                "| done | instructions | share of the real one |",
                "| --- | --- | --- |",
            ]
            for n, v in floors.items():
                what = "the real script (every rule and counter)" if n == "full" else DONE_FLOORS[n][0]
                lines.append(f"| {what} | {v:,} | {100 * v / floors['full']:.1f}% |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
