r"""Claims from a queue where 95% of the items are held by 1,000 limits whose buckets are empty.

Three runs over one private redis-server on 127.0.0.1 (TCP), one claim (multi=1) per request:
- held: 1,000 limits (cases/classify_workload.py's mix, 1/min each, their first tokens
  spent), ITEMS items of which 95% match a limit; claims until the free items run out;
- unlimited: the same number of free items in a project without limits (the latency reference);
- claim-then-filter: what the production tracker does (seed 001): take a random item, classify
  it, and put it back and answer 404 when its limit has no token.
IRSR = requests served / requests made while free items exist. Then hostile names: a limit
whose regex backtracks (`^https?://example\.com/(\w+/?)*$`, 3 s at 47 characters on a
backtracking engine, doubling per character) is added to the 1,000, and the time to classify,
release and look up names built to trip it is recorded (milliseconds: RE2 runs in linear time,
and release and item status never classify names that are not out).
Writes results/limits.json.
"""

from __future__ import annotations

import statistics
import time

from cases.classify_workload import make_patterns
from harness import Bench, case
from tracker_core.admin import census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.compiled.classify import COMPILED, Classifier
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

HELD_SHARE = 0.95
BACKTRACKING = r"regex:^https?://example\.com/(\w+/?)*$"
HOSTILE_NAMES = {
    "hostile_47_chars": "https://example.com/" + "a" * 26 + "!",
    "hostile_4kb": "https://example.com/" + "ab/" * 1300 + "!",
}


def matching_name(pattern: str, i: int) -> str:
    """Return a name that PATTERN (from classify_workload) matches."""
    kind, _, value = pattern.partition(":")
    if kind == "domain":
        return f"https://www.{value}/p/{i}"
    if kind == "type":
        return f"{value}:u{i}"
    if kind == "prefix":
        return f"{value}{i}.jpg"
    if value.startswith("^post"):
        return f"{value[1 : value.index(':') + 1]}{i}"
    return f"http://blog.example.net{value.split('[')[0]}words{i}"


def load(admin: AdminContext, project: str, items: int, patterns: list) -> int:
    held = int(items * HELD_SHARE)
    names = [matching_name(patterns[i % len(patterns)], i) for i in range(held)]
    names += [f"free-{i:09d}" for i in range(items - held)]
    item_verbs.add(admin, project, names)
    return items - held


def latency_run(engine: Engine, project: str, free: int) -> dict:
    latencies, served = [], 0
    requests = 0
    while served < free:
        start = time.perf_counter()
        status, _ = engine.claim(project, "bench", "127.0.0.1", 1)
        latencies.append(time.perf_counter() - start)
        requests += 1
        if status == 200:
            served += 1
        elif requests > 3 * free:
            break
    return summary(latencies, requests, served)


def summary(latencies: list, requests: int, served: int) -> dict:
    latencies.sort()
    return {
        "requests": requests,
        "served": served,
        "irsr": round(served / requests, 4),
        "claim_latency_us_median": round(statistics.median(latencies) * 1e6, 1),
        "claim_latency_us_p99": round(latencies[int(len(latencies) * 0.99)] * 1e6, 1),
        "claim_latency_us_mean": round(statistics.fmean(latencies) * 1e6, 1),
    }


def claim_then_filter(admin: AdminContext, project: str, free: int, patterns: list, requests: int) -> dict:
    """Take a random item, classify it, put it back when its limit has no token (seed 001)."""
    k = ProjectKeys(project)
    classifier = Classifier(patterns)
    latencies, served = [], 0
    for _ in range(requests):
        start = time.perf_counter()
        item = admin.conn.spop(k.todo)
        if item is not None and classifier.classify(item) >= 0:
            admin.conn.sadd(k.todo, item)  # its bucket is empty: the request gets nothing
        elif item is not None:
            admin.conn.zadd(k.out, {item: int(time.time() * 1000)})
            served += 1
        latencies.append(time.perf_counter() - start)
    return summary(latencies, requests, served)


def hostile_run(admin: AdminContext, engine: Engine, project: str) -> dict:
    """Milliseconds to classify, release and look up names built to make a regex backtrack."""
    limit_verbs.add(admin, project, "trap", BACKTRACKING, "1/m", reclassify=False)
    compiled = engine.limits(project)
    figures = {"limits": len(compiled.limits)}
    for label, name in HOSTILE_NAMES.items():
        timings = {}
        for step, call in (
            ("classify", lambda name=name: compiled.name_of(name)),
            ("release", lambda name=name: engine.release(project, "", [name])),
            ("item_status", lambda name=name: engine.item_status(project, name)),
        ):
            start = time.perf_counter()
            call()
            timings[f"{step}_ms"] = round((time.perf_counter() - start) * 1000, 3)
        figures[label] = {"chars": len(name), **timings}
    return figures


@case("limits")
def run(bench: Bench) -> dict:
    """Claims from a queue 95% held by 1,000 limits with empty buckets; hostile names."""
    item_count = bench.size("items", 100_000, quick=3_000)
    patterns = make_patterns()
    server = bench.redis()
    admin, engine = AdminContext.from_url(server.url), Engine(server.url)
    project_verbs.create(admin, "held")
    for i, pattern in enumerate(patterns):
        limit_verbs.add(admin, "held", f"l{i}", pattern, "1/m", reclassify=False)
    t0 = time.perf_counter()
    free = load(admin, "held", item_count, patterns)
    load_s = time.perf_counter() - t0
    # Spend every limit's first token, so all buckets are empty while we measure.
    spent = 0
    while spent < len(patterns):
        status, got = engine.claim("held", "warmup", "127.0.0.1", 1000)
        spent += sum(1 for name in got if not name.startswith("free-"))
        if status != 200 or all(name.startswith("free-") for name in got):
            break
    free_left = census_verbs.status(admin, "held")["queues"]["todo"]
    held_run = latency_run(engine, "held", free_left)

    project_verbs.create(admin, "plain")
    item_verbs.add(admin, "plain", [f"free-{i:09d}" for i in range(free_left)])
    plain_run = latency_run(engine, "plain", free_left)

    project_verbs.create(admin, "filter")
    with_held = [matching_name(patterns[i % len(patterns)], i) for i in range(int(item_count * HELD_SHARE))]
    admin.conn.sadd(ProjectKeys("filter").todo, *with_held, *[f"free-{i:09d}" for i in range(free)])
    filter_run = claim_then_filter(admin, "filter", free, patterns, min(20_000, item_count))
    hostile = hostile_run(admin, engine, "held")
    held_vs_unlimited = round(held_run["claim_latency_us_median"] / plain_run["claim_latency_us_median"], 3)
    return {
        "classifier_compiled": COMPILED,
        "items": item_count,
        "held_share": HELD_SHARE,
        "limits": len(patterns),
        "load_s_with_classification": round(load_s, 2),
        "tokens_spent_before": spent,
        "held_95pct": held_run,
        "unlimited": plain_run,
        "claim_then_filter": filter_run,
        "held_latency_vs_unlimited_median": held_vs_unlimited,
        "hostile_names": hostile,
        "headline": {"held_irsr": held_run["irsr"], "held_latency_vs_unlimited_median": held_vs_unlimited},
    }
