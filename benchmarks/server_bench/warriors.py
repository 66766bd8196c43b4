"""The Locust warriors (loadtest/) against the running tracker: IRSR, RTT, status counts, accounting."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from server_bench.items import ItemSupply
from server_bench.meter import RedisMeter
from server_bench.plan import BENCHMARKS, Plan
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext


@dataclass
class BenchContext:
    """What a further driver needs: the running tracker, its Redis, the project, the plan."""

    base_url: str
    redis_url: str
    project: str
    admin: AdminContext
    supply: ItemSupply
    plan: Plan
    scratch: Path


# Warrior behaviour in the Locust runs: a short simulated download (real ones take minutes; this
# keeps a few hundred warriors claiming hundreds of times a second), a few failed items (left out
# of done), a few abandoned claims, and some backfeed of discovered items (30% repeats): the
# keywords every run passes to run_headless.
LOCUST_WARRIORS = {
    "download_time": "uniform:0.2,0.8",
    "fail_share": 0.02,
    "abandon_share": 0.01,
    "backfeed_share": 0.02,  # of claims; each posts 50 names (loadtest's default)
    "retry_delay_s": 0.5,  # seesaw-kit's back-off, scaled down from 60 s
}
LOCUST_DOWNLOAD_MEAN_MS = 500.0
LOCUST_STOP_TIMEOUT_S = 5  # warriors finish the claim in hand at the end: exact accounting


def _locust_latency(stats_csv: Path, project: str) -> dict:
    """Locust's own per-endpoint response times (ms) from its --csv stats file."""
    import csv

    names = {
        f"/{project}/request": "request",
        f"/{project}/multi=K//request": "request",
        f"/{project}/done": "done",
        "/backfeed/legacy/PROJECT-SECRET": "backfeed",
        "Aggregated": "all",
    }
    latency = {}
    with stats_csv.open(newline="") as handle:
        for row in csv.DictReader(handle):
            label = names.get(row["Name"])
            if label is None or not int(row["Request Count"]):
                continue

            def number(key, row=row):
                return round(float(row[key]), 2) if row[key] not in ("", "N/A") else None

            latency[label] = {
                "calls": int(row["Request Count"]),
                "failures": int(row["Failure Count"]),
                "mean": number("Average Response Time"),
                "p50": number("50%"),
                "p95": number("95%"),
                "p99": number("99%"),
                "max": number("Max Response Time"),
            }
    return latency


def _children_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def locust_figures(context: BenchContext) -> dict | None:
    """Drive the running tracker with the Locust warriors (loadtest/), headless, one process.

    For each user count and each multi=K (users outer, K=1 first): a fresh project seeded with
    more items than the run can claim (loadtest.seeding, the code `tracker items add` runs), a
    backfeed secret, then loadtest.runner.run_headless with Connection: close as seesaw-kit sends
    it, and at the end loadtest.seeding.account: every seeded and backfed item is in a queue, out or
    done. Returns the figures stored under "locust" in server.json.
    """
    sys.path.insert(0, str(BENCHMARKS.parent))  # loadtest/ sits beside src/; it imports no gevent here
    from loadtest import seeding
    from loadtest.runner import run_headless

    from tracker_core.access import backfeed_secrets

    plan = context.plan
    if not plan.locust_users:
        return None
    host = context.base_url.rsplit("/", 1)[0]
    meter = RedisMeter(context.admin)
    runs = []
    load_before = os.getloadavg()
    started = time.monotonic()
    for users in plan.locust_users:
        requests_per_s = users / (LOCUST_DOWNLOAD_MEAN_MS / 1000)  # a first guess, then measured
        for multi in plan.locust_multi:
            project = f"locust-{users}u-m{multi}"
            label = f"{users} users, " + ("/request" if multi == 1 else f"multi={multi}")
            project_verbs.create(context.admin, project, {"title": "Locust benchmark"})
            _, secret = backfeed_secrets.create(context.admin.conn, context.supply.engine.keys(project))
            seed_count = int(requests_per_s * plan.locust_run_s * multi * 1.4) + 1000
            seed_start = time.perf_counter()
            seeded = seeding.seed(context.redis_url, project, seed_count)
            seed_s = time.perf_counter() - seed_start
            print(
                f"  locust {label}: {plan.locust_run_s} s, {seed_count} items seeded in {seed_s:.1f} s",
                flush=True,
            )
            workdir = context.scratch / f"locust-{project}"
            cpu_before, wall_start = _children_cpu_s(), time.perf_counter()
            meter.start()
            try:
                result = run_headless(
                    host,
                    project=project,
                    users=users,
                    spawn_rate=users,
                    run_time_s=plan.locust_run_s,
                    multi=str(multi),
                    backfeed_secret=secret,
                    csv_prefix="locust",
                    extra_args=("--stop-timeout", str(LOCUST_STOP_TIMEOUT_S)),
                    workdir=workdir,
                    **LOCUST_WARRIORS,
                )
            except RuntimeError as exc:
                print(f"  locust {label} FAILED: {exc}", flush=True)
                runs.append({"label": label, "users": users, "multi": multi, "error": str(exc)})
                continue
            wall_s = time.perf_counter() - wall_start
            locust_cpu_s = _children_cpu_s() - cpu_before
            summary, counts = result["summary"], result["summary"]["counts"]
            calls = counts["requests"] + counts["done_calls"] + counts["backfeed_posts"]
            redis_figures = meter.stop(calls)
            accounting = seeding.account(
                context.redis_url, seeded, counts["backfeed_items_new"], counts["items_done"]
            )
            settled = counts["items_done"] + counts["items_failed"] + counts["items_abandoned"]
            if summary["requests_per_s"]:
                requests_per_s = summary["requests_per_s"]
            rtt = summary["rtt_ms"]
            run = {
                "label": label,
                "users": users,
                "multi": multi,
                "project": project,
                "run_time_s": plan.locust_run_s,
                "span_s": summary["span_s"],
                "items_seeded": seed_count,
                "seconds_seeding": round(seed_s, 1),
                "irsr": summary["irsr"],
                "irsr_requests_counted": summary["irsr_requests_counted"],
                "misses_while_items_remained": summary["misses_while_items_remained"],
                "rtt_ms": rtt,
                "rtt_over_download_mean_ms": (
                    round(rtt["mean"] - LOCUST_DOWNLOAD_MEAN_MS, 1) if rtt["mean"] is not None else None
                ),
                "requests_per_s": summary["requests_per_s"],
                "http_calls_per_s": (round(calls / summary["span_s"], 1) if summary["span_s"] else None),
                "items_claimed_per_s": summary["items_claimed_per_s"],
                "items_done_per_s": summary["items_done_per_s"],
                "status": {
                    "404": counts["no_items_404"],
                    "429": counts["rate_limited_429"],
                    "other_4xx": counts["refused_4xx"],
                    "5xx": counts["server_5xx"],
                    "transport_errors": counts["transport_errors"],
                    "done_not_ok": counts["done_not_ok"],
                    "backfeed_errors": counts["backfeed_errors"],
                },
                "latency_ms": _locust_latency(workdir / "locust_stats.csv", project),
                "counts": counts,
                "every_claimed_item_settled": settled == counts["items_claimed"],
                "accounting": accounting,
                "all_items_accounted": accounting["ok"],
                "thresholds_passed": result["passed"],
                "threshold_failures": result["failures"],
                "exit_code": result["exit_code"],
                "load_generator_cpu_cores": round(locust_cpu_s / wall_s, 2) if wall_s else None,
                "redis": redis_figures,
                "timeline": summary["timeline"],
                "command": [arg if arg != secret else "SECRET" for arg in result["command"]],
            }
            runs.append(run)
            request_latency = run["latency_ms"].get("request", {})
            print(
                f"    IRSR {100 * (run['irsr'] or 0):.2f}%  {run['requests_per_s']} claims/s  "
                f"{run['items_claimed_per_s']} items/s  RTT mean {rtt['mean']} p99 {rtt['p99']} ms  "
                f"/request p99 {request_latency.get('p99')} ms  5xx {counts['server_5xx']}  "
                f"accounted {accounting['ok']}  Locust CPU {run['load_generator_cpu_cores']} cores",
                flush=True,
            )
    return {
        "setup": {
            "users": list(plan.locust_users),
            "multi": list(plan.locust_multi),
            "run_time_s": plan.locust_run_s,
            "spawn": "all users within 1 s",
            "download_time_s": LOCUST_WARRIORS["download_time"],
            "download_mean_ms": LOCUST_DOWNLOAD_MEAN_MS,
            **{key: LOCUST_WARRIORS[key] for key in ("fail_share", "abandon_share", "backfeed_share")},
            "backfeed_items_per_post": 50,
            "backfeed_repeat_share": 0.3,
            "retry_delay_s": LOCUST_WARRIORS["retry_delay_s"],
            "connection": "close (as seesaw-kit)",
            "load_generator": "one local Locust process",
            "stop_timeout_s": LOCUST_STOP_TIMEOUT_S,
        },
        "runs": runs,
        "all_items_accounted": bool(runs) and all(r.get("all_items_accounted") for r in runs),
        "no_5xx": bool(runs) and all(r.get("status", {}).get("5xx") == 0 for r in runs),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "seconds": round(time.monotonic() - started, 1),
    }
