"""The five measurements: hello-world, the claim script alone, `/request`, `/done` and backfeed.

Every HTTP case is wrk with keep-alive connections (benchmarks/wrk/*.lua, as server_bench drives
it) against ONE bjoern worker. A full run first probes each case for a few seconds (which also
warms it up) to size the items it needs, so a run never empties todo and measures 404s instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cpu_bench.meters import RedisCpu, WorkerCpu, per_unit
from server_bench.items import ItemSupply, claim_for_dones
from server_bench.plan import PROJECT
from server_bench.wrk import run_wrk
from tracker_core.access import backfeed_secrets
from tracker_core.admin import backfeed_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items import bloom
from tracker_core.items.engine import Engine

BACKFEED_PROJECT = "cpubackfeed"  # its own Bloom filter, apart from the items seeded for claims
BACKFEED_ITEMS_PER_POST = 400  # benchmarks/wrk/backfeed.lua
BLOOM_FP_RATE = 1e-6
DOWNLOADERS = [f"warrior0-{n}" for n in range(500)]  # as request.lua spreads per-downloader keys


@dataclass(frozen=True)
class Plan:
    seconds: float  # measured time per case
    probe_s: float  # 0: no probe, seed from GUESS_PER_S
    connections: int = 16
    backfeed_connections: int = 4
    busy_connections: int = 64  # the full-load rows (run.full_load)


# Rates a quick run seeds for (no probe): generous for this machine class, the full-load rows
# (all workers) included.
GUESS_PER_S = {"request": 40_000, "done": 30_000, "claim": 15_000, "backfeed_items": 150_000}


@dataclass
class Rig:
    """What the cases share: the Redis, its meter, the engine and the item supply."""

    plan: Plan
    redis_url: str
    admin: AdminContext
    scratch: Path

    def __post_init__(self):
        self.engine = Engine(self.redis_url)
        self.supply = ItemSupply(self.admin, self.engine)
        self.redis = RedisCpu(self.admin.conn)

    def wrk_case(self, server_pid: int, url: str, script: str, script_args: tuple = (), connections=None):
        """One measured wrk run: its figures, and CPU per request of the worker and Redis."""
        workers = WorkerCpu(server_pid)
        self.redis.start()
        workers.start()
        figures = run_wrk(
            url, script, connections or self.plan.connections, self.plan.seconds, False, script_args
        )
        worker_s = workers.stop()
        figures.update(per_unit(self.redis.stop(), figures["requests"], worker_s))
        figures["connections"] = connections or self.plan.connections
        figures["workers_measured"] = len(workers.pids)
        return figures

    def probe_rate(self, url: str, script: str, script_args: tuple = (), connections=None) -> float | None:
        """Requests/s of a short unmeasured run (None in a quick run): what to seed for."""
        if not self.plan.probe_s:
            return None
        probe = run_wrk(
            url, script, connections or self.plan.connections, self.plan.probe_s, False, script_args
        )
        return probe["requests_per_s"]

    def needed(self, rate: float | None, guess_key: str) -> int:
        return int((rate or GUESS_PER_S[guess_key]) * self.plan.seconds * 1.5) + 1_000


def hello(bench: Rig, server_pid: int, port: int, redis: bool = False) -> dict:
    """The hello-world app; REDIS: it makes one Redis PING a request (Redis's CPU then counts)."""
    url = f"http://127.0.0.1:{port}/{PROJECT}/request"
    bench.probe_rate(url, "request.lua")
    figures = bench.wrk_case(server_pid, url, "request.lua")
    if not redis:
        del figures["redis_cpu_us"], figures["commands"]  # the plain hello-world never calls Redis
    return figures


def request(bench: Rig, server_pid: int, port: int) -> dict:
    url = f"http://127.0.0.1:{port}/{PROJECT}/request"
    bench.supply.top_up(20_000)
    rate = bench.probe_rate(url, "request.lua")
    bench.supply.recycle()
    bench.supply.top_up(bench.needed(rate, "request"))
    figures = bench.wrk_case(server_pid, url, "request.lua")
    figures["todo_left"] = bench.supply.todo()
    bench.supply.recycle()
    return figures


def done(bench: Rig, server_pid: int, port: int) -> dict:
    """Dones of items claimed through the engine just before, each reported once."""
    url = f"http://127.0.0.1:{port}/{PROJECT}/done"
    claims = bench.scratch / "claims.tsv"

    def claim(count: int) -> tuple:
        bench.supply.top_up(count)
        claim_for_dones(bench.engine, count, claims)
        return (claims, 2)  # done.lua: the file and wrk's thread count

    rate = bench.probe_rate(url, "done.lua", claim(20_000))
    count = bench.needed(rate, "done")
    figures = bench.wrk_case(server_pid, url, "done.lua", claim(count))
    # Past COUNT, done.lua starts over: repeats cost less and would flatter the figures.
    figures["claims_prepared"] = count
    figures["repeats"] = max(0, figures["requests"] - count)
    return figures


def backfeed(bench: Rig, server_pid: int, port: int, kind: str = bloom.LAYERED, tag: str = "") -> dict:
    """400 new items a post into a Bloom filter of KIND at 1e-6 sized for the run (one layer).

    No probe: backfeed.lua numbers its names afresh in every wrk run, so a probe's names would
    come back as seen items in the measured run and make Redis's cost per new item look wrong.
    The queue starts empty and ends holding every new item: its size is in the figures, as Redis's
    cost per item grows with it (a set's SADD of one member costs more in a bigger set).
    TAG names another project (another round of the same case: an empty filter and queue).
    """
    admin = bench.admin
    project = f"{BACKFEED_PROJECT}-{kind}{tag}"  # its own filter and queue per kind (and round)
    project_verbs.create(admin, project)
    project_verbs.set_settings(admin, project, {"backfeed_max_items": "0"})  # no 503 when full
    connections = bench.plan.backfeed_connections
    capacity = bench.needed(None, "backfeed_items")
    backfeed_verbs.bloom_filter(admin, project, capacity=capacity, fp_rate=BLOOM_FP_RATE, kind=kind)
    keys = admin.keys(project)
    _, secret = backfeed_secrets.create(admin.conn, keys)
    url = f"http://127.0.0.1:{port}/backfeed/legacy/{project}-{secret}"
    queued_before = admin.conn.scard(keys.backfeed)
    figures = bench.wrk_case(server_pid, url, "backfeed.lua", ("new",), connections)
    new_items = admin.conn.scard(keys.backfeed) - queued_before
    sent = figures["requests"] * BACKFEED_ITEMS_PER_POST
    figures.update(
        items_sent=sent,
        new_items=new_items,
        queue_before=queued_before,
        queue_after=queued_before + new_items,
        new_items_per_s=round(new_items / figures["seconds"], 1),
        redis_cpu_us_per_new_item=round(figures["redis_cpu_us"] * figures["requests"] / new_items, 3),
        worker_cpu_us_per_new_item=round(figures["worker_cpu_us"] * figures["requests"] / new_items, 3),
        bloom_script_us_per_new_item=round(
            figures["evalsha_us_per_call"] * figures["evalsha_calls"] / new_items, 3
        ),
        bloom=backfeed_verbs.bloom_filter(admin, project),
        # A fingerprint filter's buckets per block as stored (0: independent pairs, or not one).
        bloom_block=int(admin.conn.hget(keys.bloom, "block") or 0),
    )
    return figures


def backfeed_fingerprint(bench: Rig, server_pid: int, port: int, tag: str = "") -> dict:
    """backfeed into a fingerprint filter (3-byte fingerprints in buckets: tracker_core.items.bloom),
    configured as `tracker backfeed filter P --kind fingerprint` does (blocked)."""
    return backfeed(bench, server_pid, port, bloom.FINGERPRINT, tag)


def claim_script(bench: Rig) -> dict:
    """The claim script called one at a time from here (Engine.claim: one EVALSHA, one item,
    500 downloaders in turn): its own µs per call from commandstats, and Redis CPU per call with
    the round trip's reading and writing."""
    engine = bench.engine

    def call(n: int) -> int:
        status, _ = engine.claim(PROJECT, DOWNLOADERS[n % 500], "127.0.0.1", 1)
        return status

    bench.supply.top_up(bench.needed(None, "claim"))
    call(0)  # loads the script (NOSCRIPT) and the settings outside the measured run
    calls = refused = 0
    bench.redis.start()
    started = time.perf_counter()
    deadline = started + bench.plan.seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            refused += call(calls) != 200
            calls += 1
    seconds = time.perf_counter() - started
    figures = {"calls": calls, "seconds": round(seconds, 3), "calls_per_s": round(calls / seconds, 1)}
    figures.update(per_unit(bench.redis.stop(), calls), not_200=refused)
    bench.supply.recycle()
    return figures
