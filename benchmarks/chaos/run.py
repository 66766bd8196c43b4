"""The fault schedule and the report: load, drive, inject faults, drain, take the census."""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import redis

from chaos import census
from chaos.ledger import LOSS_WINDOW_S, Ledger
from chaos.procs import ChaosCluster, ChaosRedis, ChaosServer, skewed_env, wait_for
from chaos.warriors import Backfeeder, Prober, Warrior
from tracker_core.admin import backfeed_verbs, census_verbs, item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import free_port
from tracker_core.keyspace import ProjectKeys

PROJECT = "chaos"
LIMITED_PREFIX = "https://limited.example/"
FAULTS = ("worker_kill", "parent_kill", "redis_kill", "redis_stall", "redis_full", "clock_skew")
# On a Redis Cluster (--cluster): the single Redis's kill, stall and fill become one fault, the
# project's primary killed and its replica taking over.
CLUSTER_FAULTS = ("worker_kill", "parent_kill", "primary_failover", "clock_skew")
SINGLE_ONLY = {"redis_kill", "redis_stall", "redis_full"}
SKEW_OFFSETS = ("+7h", "-7h")
SAMPLE = 20  # items named per violation in the report


@dataclass
class Config:
    seed: int = 12
    items: int = 40_000
    warriors: int = 8
    workers: int = 2
    rounds: int = 2  # each round applies every fault once, in a seeded order
    faults: tuple = FAULTS
    backfeed_batch: int = 10_000  # the documented maximum per post
    backfeed_posts: int = 6
    limit_rate: str = "3000/s"
    max_multi: int = 100
    reclaim_ttl_s: float = 5.0
    warmup_s: float = 3.0
    settle_s: float = 5.0  # load between faults, recovery measured in it
    redis_down_s: float = 1.0
    stall_s: float = 12.0  # past the tracker's 10 s Redis client timeout
    fill_hold_s: float = 4.0
    skew_hold_s: float = 4.0  # a node 7 h off serves half the calls this long
    headroom_mb: int = 48  # maxmemory = memory used after loading + this
    parent_grace_s: float = 3.0  # how long workers may outlive a killed parent
    appendfsync: str = "everysec"
    drain_timeout_s: float = 120.0
    keep_dir: bool = False
    shards: int = 1  # the project's shards (docs/sharding.md); with --cluster, one a primary
    # A Redis Cluster of 3 primaries, each with a replica, instead of one redis-server; the
    # faults then default to CLUSTER_FAULTS.
    cluster: bool = False
    extra: dict = field(default_factory=dict)


def item_name(rng: random.Random, n: int) -> str:
    """URL names as the biggest projects use them: slashes, ?, %, #, spaces, some kilobytes long."""
    kind = n % 10
    if kind == 0:
        return f"https://example.com/{n}/" + "a%2Fb/" * rng.randint(150, 600) + "?long=1"
    if kind in (1, 2):
        return f"https://example.com/user {n}/photos?page={rng.randint(1, 99)}&q=a%20b#top"
    if kind == 3:
        return f"{LIMITED_PREFIX}{n}/loaded?x=%41#f"  # held by the limit from the start
    return f"https://example.org/p/{n}/{rng.getrandbits(32):x}?s=1%25&t=#frag/x y"


def backfed_name(rng: random.Random, n: int) -> str:
    if n % 5 == 4:
        return f"https://example.net/found/{n}?ref=a%20b#x"
    return f"{LIMITED_PREFIX}found/{n}?p={rng.getrandbits(20)}%20#y z"


class Run:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.dir = Path(tempfile.mkdtemp(prefix="chaos-"))
        if cfg.cluster:
            self.redis = ChaosCluster(self.dir / "cluster", cfg.appendfsync, ProjectKeys(PROJECT).tag)
        else:
            self.redis = ChaosRedis(self.dir / "redis", free_port(), 0, cfg.appendfsync)
        # Only everysec lets Redis answer before it writes (chaos.ledger, on the loss window).
        window = LOSS_WINDOW_S if cfg.appendfsync == "everysec" else 0.0
        self.t0 = time.monotonic()
        self.ledger = Ledger(cfg.reclaim_ttl_s, window, self.t0)
        self.stop, self.draining = threading.Event(), threading.Event()
        self.server: ChaosServer | None = None
        self.faults: list[dict] = []
        self.orphans: list[int] = []
        self.skewed: list | None = None  # [port, calls sent to it] while a skewed node serves

    # -- setup ------------------------------------------------------------------------------------

    def create_project(self, admin) -> None:
        """The one place the project is made, over cfg.shards shards."""
        cfg = self.cfg
        project_verbs.create(
            admin,
            PROJECT,
            {"reclaim_ttl_s": str(cfg.reclaim_ttl_s), "max_multi": str(cfg.max_multi)},
            shards=cfg.shards,
        )

    def setup(self) -> None:
        cfg = self.cfg
        self.redis.start()
        admin = AdminContext.from_url(self.redis.url)
        self.create_project(admin)
        limit_verbs.add(admin, PROJECT, "limited", f"prefix:{LIMITED_PREFIX}", cfg.limit_rate)
        self.secret = backfeed_verbs.create_secret(admin, PROJECT)["secret"]  # on every shard
        self.shards = admin.layout(PROJECT).keys
        names = [item_name(self.rng, n) for n in range(cfg.items)]
        item_verbs.add(admin, PROJECT, names)
        self.ledger.loaded.update(names)
        self.maxmemory = None
        if not cfg.cluster:  # only redis_full needs it (a single Redis's fault)
            used = int(admin.conn.info("memory")["used_memory"])
            self.maxmemory = used + cfg.headroom_mb * 2**20
            admin.conn.config_set("maxmemory", self.maxmemory)
            self.redis.extra[3] = str(self.maxmemory)  # kept across restarts
        admin.conn.close()
        self.server = ChaosServer(self.redis.url, free_port(), cfg.workers, self.dir / "serve.log")
        self.server.start()

    def port(self) -> int:
        skewed = self.skewed
        if skewed is not None and random.random() < 0.5:
            skewed[1] += 1
            return skewed[0]
        return self.server.port

    # -- faults: each returns its detail; its "end" is when recovery is measured from ----------

    def worker_kill(self) -> dict:
        pid, replaced, took = self.server.kill_worker(self.rng.choice)
        return {"pid": pid, "replaced": replaced, "replaced_in_s": round(took, 3)}

    def parent_kill(self) -> dict:
        orphans = self.server.kill_parent(self.cfg.parent_grace_s)
        self.orphans += orphans
        for attempt in range(20):  # noqa: B007 (reported after the loop)
            try:
                self.server.start()
                break
            except RuntimeError:
                time.sleep(0.5)
        return {"orphaned_workers": orphans, "restart_attempts": attempt + 1}

    def redis_kill(self) -> dict:
        self.redis.kill9()
        self.ledger.redis_killed(time.monotonic())
        time.sleep(self.cfg.redis_down_s)
        started = time.monotonic()
        self.redis.restart()
        return {"aof_load_s": round(time.monotonic() - started, 3)}

    def redis_stall(self) -> dict:
        self.redis.stop_process()
        time.sleep(self.cfg.stall_s)
        self.redis.continue_process()
        return {"stalled_s": self.cfg.stall_s}

    def redis_full(self) -> dict:
        r = self.redis.client()
        value, n = os.urandom(1 << 20), 0
        started = time.monotonic()
        while time.monotonic() - started < 60:
            try:
                r.set(f"chaos:fill:{n}", value)
                n += 1
            except redis.exceptions.OutOfMemoryError:
                break
        time.sleep(self.cfg.fill_hold_s)
        for start in range(0, n, 100):
            r.delete(*[f"chaos:fill:{i}" for i in range(start, min(n, start + 100))])
        r.close()
        return {"filled_mb": n, "held_s": self.cfg.fill_hold_s}

    def primary_failover(self) -> dict:
        """kill -9 of the project's primary (Cluster only): its replica takes over after the
        node timeout (2 s) and an election, the tracker follows it; then the old primary is
        started again from its AOF and rejoins as the new one's replica. With a replica attached
        every change is acknowledged by WAIT, so nothing acknowledged may be lost: the ledger
        excuses nothing here (unlike a single Redis's kill, chaos.ledger)."""
        detail = self.redis.fail_over()
        killed_at = detail.pop("killed_at")
        served = self.prober.recovered_after(killed_at)
        return {**detail, "served_again_s": None if served is None else round(served, 3)}

    def clock_skew(self) -> dict:
        """A second `tracker serve` whose clock runs 7 h fast or slow (libfaketime), with no
        bound on it (--max-clock-offset 0), serves half the warriors' calls for skew_hold_s: the
        ledger sees whether it hands out a claim of the first node's before its reclaim time."""
        offset = self.rng.choice(SKEW_OFFSETS)
        node = ChaosServer(
            self.redis.url,
            free_port(),
            1,
            self.dir / "skewed.log",
            env=skewed_env(offset),
            options=("--max-clock-offset", "0"),
        )
        node.start()
        self.skewed = [node.port, 0]
        try:
            time.sleep(self.cfg.skew_hold_s)
        finally:
            calls = self.skewed[1]
            self.skewed = None
            node.stop()
        return {"offset": offset, "calls_to_skewed_node": calls}

    def inject(self, name: str) -> None:
        at = time.monotonic()
        detail = getattr(self, name)()
        end = time.monotonic()
        self.stop.wait(self.cfg.settle_s)
        recovery = self.prober.recovered_after(end)
        if recovery is None:  # not within the settle time: wait for it, bounded
            wait_for(lambda: self.prober.recovered_after(end) is not None, 60, 0.2)
            recovery = self.prober.recovered_after(end)
        self.faults.append(
            {
                "fault": name,
                "at_s": round(at - self.t0, 2),
                "fault_s": round(end - at, 3),
                "recovery_s": None if recovery is None else round(recovery, 3),
                **detail,
            }
        )
        print(
            f"chaos: {name} at {at - self.t0:.1f}s: recovered in {recovery} s {detail}",
            file=sys.stderr,
            flush=True,
        )

    # -- the run ----------------------------------------------------------------------------------

    def drive(self) -> None:
        cfg = self.cfg
        self.warriors = [
            Warrior(
                f"warrior{w}",
                cfg.seed * 1000 + w,
                self.port,
                PROJECT,
                self.ledger,
                self.stop,
                self.draining,
                cfg.max_multi,
            )
            for w in range(cfg.warriors)
        ]
        self.backfeeder = Backfeeder(
            cfg.seed * 1000 + 999,
            self.port,
            PROJECT,
            self.secret,
            self.ledger,
            self.stop,
            cfg.backfeed_batch,
            cfg.backfeed_posts,
            backfed_name,
        )
        self.prober = Prober(self.port, PROJECT, self.ledger, self.stop)
        for t in (*self.warriors, self.backfeeder, self.prober):
            t.start()
        self.stop.wait(cfg.warmup_s)
        for _ in range(cfg.rounds):
            order = list(cfg.faults)
            self.rng.shuffle(order)
            for name in order:
                self.inject(name)
        self.backfeeder.join(timeout=120)
        self.draining.set()
        self.drain_s = self.drain()
        self.stop.set()
        for t in (*self.warriors, self.prober):
            t.join(timeout=30)

    def drain(self) -> float | None:
        """Let the warriors finish everything (reclaims bring back what was lost on the way)."""
        admin = AdminContext.from_url(self.redis.url)
        started = time.monotonic()

        def empty() -> bool:
            status = census_verbs.status(admin, PROJECT)
            return status["todo_total"] == 0 and status["out"] == 0

        finished = wait_for(empty, self.cfg.drain_timeout_s, 0.5)
        admin.conn.close()
        return round(time.monotonic() - started, 2) if finished else None

    def report(self) -> dict:
        cfg, ledger = self.cfg, self.ledger
        # Every shard read on the node that owns it now (after failovers), its places added up:
        # an item is in one place of all the shards.
        clients = [self.redis.client(k.tag) for k in self.shards]
        found: dict = {}
        for k, r in zip(self.shards, clients):
            for place, counter in census.places(r, PROJECT, k=k).items():
                found[place] = found.get(place, Counter()) + counter
        count = census.where(found)
        done = found["done"]
        expected = ledger.loaded
        maybe_lost = ledger.backfed_maybe_lost()
        lost = sorted(i for i in maybe_lost if count[i] == 0)
        missing = sorted(i for i in expected if count[i] == 0 and i not in maybe_lost)
        twice_placed = sorted(i for i, n in count.items() if n > 1)
        unknown = sorted(i for i in count if i not in expected and i not in ledger.maybe)
        acked_missing = sorted(i for i in ledger.acked_done if i not in done)
        stranded = sorted(found["out"])
        counters = {
            f"shard {index}: {check}" if len(self.shards) > 1 else check: pair
            for index, (k, r) in enumerate(zip(self.shards, clients))
            for check, pair in census.counter_checks(r, PROJECT, k=k).items()
        }
        for r in clients:
            r.close()
        server_errors = {
            k: v
            for k, v in ledger.statuses.items()
            if k.rsplit(" ", 1)[1].isdigit() and int(k.rsplit(" ", 1)[1]) >= 500 and not k.endswith(" 503")
        }
        crashes = {k: v for k, v in ledger.statuses.items() if k.startswith("warrior-crash")}
        violations = {
            "missing": missing,
            "in_two_places": twice_placed,
            "never_loaded": unknown,
            "acked_done_not_in_done": acked_missing,
            "stranded_claims": stranded,
            "handed_twice": ledger.twice,
            "handed_after_acked_done": ledger.after_done,
            "counters": counters,
            "server_errors": server_errors,
            "orphaned_workers": self.orphans,
            "warrior_crashes": crashes,
            "not_recovered": [f["fault"] for f in self.faults if f["recovery_s"] is None],
            "not_drained": [] if self.drain_s is not None else ["drain timed out"],
        }
        counts = {name: len(v) if isinstance(v, (list, dict)) else v for name, v in violations.items()}
        requests = dict(sorted(ledger.statuses.items()))
        return {
            "command": "make chaos",
            "config": asdict(cfg),
            "redis": {
                "topology": "cluster: 3 primaries, each with a replica" if cfg.cluster else "single",
                "shards": cfg.shards,
                "appendfsync": cfg.appendfsync,
                "maxmemory_bytes": self.maxmemory,
                "restarts": self.redis.restarts,
            },
            "server_starts": self.server.starts,
            "duration_s": round(time.monotonic() - self.t0, 1),
            "drain_s": self.drain_s,
            "items_loaded": cfg.items,
            "items_backfed_acknowledged": len(ledger.loaded) - cfg.items,
            "items_backfed_unanswered": len(ledger.maybe),
            "items_expected": len(expected),
            "places": {name: sum(c.values()) for name, c in found.items()},
            "requests_total": sum(requests.values()),
            "requests_by_status": requests,
            "items_handed_out": ledger.handed,
            "items_handed_out_twice": len(ledger.twice),
            "items_reissued_after_reclaim_ttl": ledger.reclaimed,
            "dones_acknowledged": len(ledger.acked_done),
            # Writes a Redis kill undid (appendfsync everysec): not violations, see chaos.ledger.
            "undone_by_redis_kill": {
                "loss_window_s": ledger.loss_window_s,
                "redis_kills": len(ledger.kills),
                "handouts": ledger.undone[:SAMPLE],
                "handouts_total": len(ledger.undone),
                "backfed_items_gone": len(lost),
                "backfed_items_gone_sample": [i[:200] for i in lost[:SAMPLE]],
            },
            "faults": self.faults,
            "violation_counts": counts,
            "violations": {
                name: (v[:SAMPLE] if isinstance(v, list) else v) for name, v in violations.items()
            },
            "passed": not any(counts.values()),
        }

    def close(self) -> None:
        self.stop.set()
        if self.server is not None:
            self.server.stop()
        self.redis.stop()
        if not self.cfg.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def checked(cfg: Config) -> Config:
    """CFG with the faults its topology takes: CLUSTER_FAULTS by default on a Cluster; a fault
    of the other topology is refused."""
    if cfg.cluster and tuple(cfg.faults) == FAULTS:
        cfg = replace(cfg, faults=CLUSTER_FAULTS)
    wrong = set(cfg.faults) & SINGLE_ONLY if cfg.cluster else set(cfg.faults) - set(FAULTS)
    if wrong:
        where = "a Redis Cluster" if cfg.cluster else "a single Redis (add --cluster)"
        raise ValueError(f"not faults of {where}: {', '.join(sorted(wrong))}")
    return cfg


def run(cfg: Config) -> dict:
    """One whole fault run; the report says what held (``passed``) and every violation."""
    cfg = checked(cfg)
    chaos = Run(cfg)
    try:
        chaos.setup()
        chaos.drive()
        report = chaos.report()
        report["scratch_dir"] = str(chaos.dir) if cfg.keep_dir else None
        return report
    finally:
        chaos.close()
