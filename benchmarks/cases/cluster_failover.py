"""A Redis Cluster primary failing over under `tracker serve`: what clients see, what WAIT costs.

    PYTHONPATH=benchmarks python -m harness --only cluster_failover [--set trials=3 workers=2 warriors=4]

Failover: a cluster of 3 primaries, each with a replica (tests/support/redis_topologies.Cluster,
node timeout 2 s, cluster-require-full-coverage no as ansible/ deploys it) and `tracker serve`
with WORKERS workers; two projects on different primaries, FAILING and OTHER. WARRIORS threads
claim and finish FAILING's items over HTTP, and a prober per project claims one item every
50 ms and reports it done. FAILING's primary is killed (SIGKILL); each trial gives the failover
(the kill to cluster_state ok on every live node), when a claim sent after the kill was first
answered for each project, each project's longest wait for an answer from the kill on, and the
answers that were not 200/404. The old primary is started again (it rejoins as a replica)
before the next trial, which kills FAILING's primary again.

WAIT: claim+done pairs through the Engine on one client, on a primary with a replica, with
``?wait_replicas=0`` and with the default (WAIT 1 after each script), alternated ROUNDS times.

Writes benchmarks/results/cluster_failover.json and .md.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter

import redis

from harness import Bench, case
from harness.results import provenance_line
from support.http_warrior import RetryingWarriors, post_once
from support.processes import start_live_server, stop_live_server
from support.redis_topologies import Cluster
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys


class Prober(threading.Thread):
    """Claims one item of PROJECT every 50 ms and reports it done; keeps (sent, answered, status)."""

    def __init__(self, port: int, project: str):
        super().__init__(daemon=True)
        self.port, self.project = port, project
        self.answers: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {"downloader": "prober", "api_version": "2"}
        while not self.stop.is_set():
            sent = time.monotonic()
            status, text = post_once(self.port, f"/{self.project}/request", body)
            self.answers.append((sent, time.monotonic(), status))
            if status == 200:
                done = {**body, "item": json.loads(text)["item_name"]}
                while not self.stop.is_set():
                    sent = time.monotonic()
                    status, text = post_once(self.port, f"/{self.project}/done", done)
                    self.answers.append((sent, time.monotonic(), status))
                    if status == 200:
                        break
                    time.sleep(0.05)
            self.stop.wait(0.05)

    def seen_from(self, t: float) -> dict:
        """From T on: the first claim-or-done sent after T answered 200/404 (s after T), the
        longest wait for any answer, and the answers that were neither."""
        after = [(s, r, st) for s, r, st in self.answers if r >= t]
        served = next((r - t for s, r, st in after if s >= t and st in (200, 404)), None)
        return {
            "served_again_s": None if served is None else round(served, 3),
            "longest_wait_s": round(max((r - max(s, t) for s, r, _ in after), default=0.0), 3),
            "other_answers": dict(Counter(str(st) for _, _, st in after if st not in (200, 404))),
        }


def project_on(cluster: Cluster, prefix: str, avoid: set[int]) -> tuple[str, int]:
    """A project name whose slot is on a primary not in AVOID, and that primary's port."""
    for i in range(1000):
        name = f"{prefix}{i}"
        port = cluster.owner_port(ProjectKeys(name).tag)
        if port not in avoid:
            return name, port
    raise LookupError(prefix)


def failover_trials(
    cluster: Cluster, trials: int, workers: int, warriors: int, items: int, settle_s: float
) -> list[dict]:
    server = None
    try:
        failing, failing_port = project_on(cluster, "failing", set())
        other, _ = project_on(cluster, "other", {failing_port})
        admin = AdminContext.from_url(cluster.url)
        for project in (failing, other):
            project_verbs.create(admin, project)
            item_verbs.add(admin, project, [f"{project}-{i}" for i in range(items)])
        server = start_live_server(cluster.url, workers=workers)
        results = []
        for trial in range(trials):
            probers = {name: Prober(server.port, name) for name in (failing, other)}
            load = RetryingWarriors(server.port, failing, threads=warriors, multi=5)
            for prober in probers.values():
                prober.start()
            load.start()
            time.sleep(settle_s)
            old = cluster.owner_port(ProjectKeys(failing).tag)
            new = cluster.crash_primary(old)
            killed_at = cluster.killed_at
            failover_s = time.monotonic() - killed_at
            time.sleep(settle_s)
            load.stop()
            for prober in probers.values():
                prober.stop.set()
                prober.join()
            errors = dict(Counter(str(status) for t, status in load.errors if t >= killed_at))
            results.append(
                {
                    "trial": trial + 1,
                    "killed_primary": old,
                    "new_primary": new,
                    "failover_s": round(failover_s, 3),
                    "failing_project": probers[failing].seen_from(killed_at),
                    "other_project": probers[other].seen_from(killed_at),
                    "warrior_answers_not_200": errors,
                }
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
            cluster.restart(old)
        return results
    finally:
        if server is not None:
            stop_live_server(server)


def wait_cost(cluster: Cluster, rounds: int, pairs: int) -> dict:
    admin = AdminContext.from_url(cluster.url)
    modes = (("wait_replicas=0", "?wait_replicas=0", "nowait"), ("wait_replicas=1 (default)", "", "wait"))
    timings: dict[str, list[float]] = {label: [] for label, _, _ in modes}
    waits = 0
    for _, _, project in modes:
        project_verbs.create(admin, project)
        item_verbs.add(admin, project, [f"{project}-{i}" for i in range(rounds * pairs * 2 + 10)])
    for _ in range(rounds):
        for label, query, project in modes:
            owner = redis.Redis(port=cluster.owner_port(ProjectKeys(project).tag))
            before = owner.info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
            engine = Engine(cluster.url + query)
            engine.claim(project, "warmup", "127.0.0.1", 1)  # scripts loaded, map read
            started = time.perf_counter()
            for _ in range(pairs):
                _, names = engine.claim(project, "alice", "127.0.0.1", 2)
                engine.done(project, "alice", "", names, {"data": 1}, "null")
            timings[label].append((time.perf_counter() - started) / pairs * 1e6)
            if query == "":
                waits += owner.info("commandstats").get("cmdstat_wait", {}).get("calls", 0) - before
            engine.conn.close()
    return {
        "pairs_per_round": pairs,
        "rounds": rounds,
        "us_per_claim_and_done": {k: [round(v) for v in vs] for k, vs in timings.items()},
        "median_us": {k: round(sorted(vs)[len(vs) // 2]) for k, vs in timings.items()},
        "waits_sent_with_default": waits,
    }


def _counts(answers: dict) -> str:
    return ", ".join(f"{n} x {status}" for status, n in sorted(answers.items())) or "none"


def markdown(report: dict) -> str:
    lines = [
        "# A Redis Cluster primary failing over (benchmarks/cases/cluster_failover.py)",
        "",
        provenance_line(report),
        "",
        "| trial | failover (kill to cluster ok) | failing project: served again, longest wait | "
        "its answers not 200/404 (warriors; prober) | other project: served again, longest wait | "
        "its answers not 200/404 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for t in report["failover"]:
        f, o = t["failing_project"], t["other_project"]
        lines.append(
            f"| {t['trial']} | {t['failover_s']} s | {f['served_again_s']} s, {f['longest_wait_s']} s | "
            f"{_counts(t['warrior_answers_not_200'])}; {_counts(f['other_answers'])} | "
            f"{o['served_again_s']} s, {o['longest_wait_s']} s | {_counts(o['other_answers'])} |"
        )
    w = report["wait"]
    lines += [
        "",
        f"WAIT: µs per claim+done pair on one client, {w['pairs_per_round']} pairs a round, "
        f"{w['rounds']} rounds alternated: "
        + "; ".join(
            f"{k}: median {w['median_us'][k]} ({', '.join(map(str, v))})"
            for k, v in w["us_per_claim_and_done"].items()
        )
        + f". WAITs counted on the primary with the default: {w['waits_sent_with_default']}.",
        "",
    ]
    return "\n".join(lines)


@case("cluster_failover", report=markdown)
def run(bench: Bench) -> dict:
    """A Redis Cluster primary failing over under `tracker serve`: what clients see, what WAIT costs."""
    cluster = bench.cluster(primaries=3, replicas=1)
    return {
        "failover": failover_trials(
            cluster,
            bench.size("trials", 3, quick=1),
            bench.size("workers", 2),
            bench.size("warriors", 4, quick=2),
            bench.size("items", 20_000, quick=2_000),
            bench.size("settle_s", 2.0, quick=0.5),  # load before the kill, and after the failover
        ),
        "wait": wait_cost(
            cluster, bench.size("wait_rounds", 5, quick=1), bench.size("wait_pairs", 1000, quick=50)
        ),
    }
