"""What keeping the settings and stats hashes hashtables buys a claim (script_constants.SETTINGS_PAD_FIELD
and STATS_PAD_FIELD; docs/data-model.md, "Settings").

Two projects on one private Redis (AOF off): one as create_project makes it (both hashes
hashtables), one as an older tracker left it (the same fields without the pads: listpacks). Each
stats hash holds the counters a long-running project gathers (58, the ones a claim bumps made
last, where a listpack search ends). Claims alternate between the two, round by round, so a noisy
host hits both alike; the figure is the claim script's own time (EVALSHA usec per call in INFO
commandstats), median over the rounds.

    .venv/bin/python benchmarks/hash_encoding.py [--rounds 7] [--claims 4000] [--out DIR]

Then the same two projects under callgrind (claim_cost_instructions.py's count): instructions per
claim and per done, which the host's load cannot move (``--instructions 0`` skips it).
Writes hash_encoding.json and .md (the latest run).
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_bench.results_file import write_results

from claim_cost_breakdown import client
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts.constants import RTT_BOUNDS_S, SETTINGS_PAD_FIELD, STATS_PAD_FIELD
from tracker_core.scripts.derived_counters import DONE_ONE_PREFIX, REQUEST_OUTCOMES, RTT_BUCKET_PREFIX

RESULTS = Path(__file__).with_name("results")
VARIANTS = {"hashtable": "as create_project makes them", "listpack": "as an older tracker left them"}
# A long-running project's counters, in the order a project might make them; the claim's own
# (requests_served_one) is made last, after every other.
BUCKETS = [*(str(b) for b in RTT_BOUNDS_S), "inf"]
OLD_COUNTERS = (
    [f for f in REQUEST_OUTCOMES if f != "requests_served_one"]
    + ["requests_outdated", "items_claimed", "reclaims_served", "items_reclaimed", "items_dead"]
    + ["items_done", "bytes_done", "rtt_sum_ms", "done_requests", "dones_repeated", "dones_unknown"]
    + ["dones_refused", "dones_bytes_clamped", "items_unservable", "items_dead_done", "items_released"]
    + ["log_entries_dropped", "backfeed_refused_empty", "backfeed_refused_too_long", "items_offloaded"]
    + ["items_added", "items_duplicate", "backfeed_new", "backfeed_seen", "uploads"]
    + [RTT_BUCKET_PREFIX + b for b in BUCKETS]
    + [DONE_ONE_PREFIX + b for b in BUCKETS]
)


def prepare(admin: AdminContext, project: str, variant: str) -> None:
    """PROJECT created with its long-running counters, its hashes as VARIANT says."""
    project_verbs.create(admin, project)
    shape(admin, project, variant)


def shape(admin: AdminContext, project: str, variant: str) -> None:
    """A new PROJECT given its long-running counters, its hashes as VARIANT says."""
    k = ProjectKeys(project)
    admin.conn.hset(k.stats, mapping={field: 1 for field in OLD_COUNTERS})
    if variant == "listpack":  # the same fields, written again without the pads
        settings = admin.conn.hgetall(k.settings)
        stats = admin.conn.hgetall(k.stats)
        settings.pop(SETTINGS_PAD_FIELD)
        stats.pop(STATS_PAD_FIELD)
        admin.conn.delete(k.settings, k.stats)
        admin.conn.hset(k.settings, mapping=settings)
        admin.conn.hset(k.stats, mapping=stats)
    for key in (k.settings, k.stats):
        encoding = admin.conn.object("encoding", key)
        assert encoding == variant, (key, encoding)


def measure(rounds: int, claims: int) -> dict:
    per_variant: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        with EmbeddedRedis(tmp, port=free_port(), extra=["--appendonly", "no"]) as server:
            admin = AdminContext.from_url(server.url)
            for variant in VARIANTS:
                prepare(admin, variant, variant)
            engine = Engine(server.url)
            for round_no in range(rounds):
                for variant in VARIANTS:
                    names = [f"https://example.com/{variant}/{round_no}/{n}?q=%20x#f" for n in range(claims)]
                    for i in range(0, claims, 1000):
                        item_verbs.add(admin, variant, names[i : i + 1000])
                    engine.settings(variant)  # cached, as a worker has it
                    admin.conn.config_resetstat()
                    for n in range(claims):
                        status = engine.claim(variant, *client(n), 1)[0]
                        assert status == 200, status
                    stats = admin.conn.info("commandstats")["cmdstat_evalsha"]
                    per_variant[variant].append(float(stats["usec_per_call"]))
    return {
        variant: {"median_us": round(statistics.median(v), 2), "best_us": round(min(v), 2), "rounds": v}
        for variant, v in per_variant.items()
    }


def instruction_counts(runs: int) -> dict:
    """Instructions per claim and per done script run of each variant (callgrind, as
    claim_cost_instructions.py counts them: deterministic, the host's load cannot move them)."""
    from claim_cost_instructions import per_run
    from tracker_core import scripts

    counts = {}
    for variant in VARIANTS:
        counts[variant] = {}
        for name in ("claim", "done"):
            reshape = functools.partial(shape, variant=variant)
            counts[variant][name] = per_run(scripts.SCRIPTS[name], runs, name == "done", shape=reshape)
    return counts


def markdown(result: dict) -> str:
    lines = [
        "# The claim with its settings and stats hashes as hashtables or as listpacks",
        "",
        f"`python benchmarks/hash_encoding.py` on {result['when']} ({result['rounds']} alternating "
        f"rounds of {result['claims']} claims, 58 counters in each stats hash, the claim's made "
        "last). The claim script's own time (EVALSHA usec per call, INFO commandstats).",
        "",
        "| hashes | own µs per claim, median | best |",
        "| --- | ---: | ---: |",
    ]
    for variant, what in VARIANTS.items():
        figures = result["figures"][variant]
        lines.append(f"| {variant} ({what}) | {figures['median_us']} | {figures['best_us']} |")
    if result.get("instructions"):
        lines += [
            "",
            f"Instructions per script run (callgrind, {result['instruction_runs']} runs; the same projects):",
            "",
            "| hashes | claim | done |",
            "| --- | ---: | ---: |",
        ]
        for variant, counts in result["instructions"].items():
            lines.append(f"| {variant} | {counts['claim']:,} | {counts['done']:,} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--claims", type=int, default=4000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--instructions", type=int, default=300, help="script runs under callgrind (0: skip; ~1 min)"
    )
    args = parser.parse_args(argv)
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rounds": args.rounds,
        "claims": args.claims,
        "machine": platform.platform(),
        "figures": measure(args.rounds, args.claims),
        "instruction_runs": args.instructions,
        "instructions": instruction_counts(args.instructions) if args.instructions else {},
    }
    write_results(args.out, "hash_encoding", result, markdown(result))
    return result


if __name__ == "__main__":
    main()
