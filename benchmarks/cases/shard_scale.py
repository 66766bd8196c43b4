"""One project over 1 to 4 Redis Cluster shards, Redis the bottleneck (issue 28).

Starts a Redis Cluster of 4 primaries (no replicas, AOF off as cpu.md) on 127.0.0.1 and moves
each redis-server into a cgroup of its own, /sys/fs/cgroup/cpu/tracker-bench-PORT, whose
cpu.cfs_quota_us caps it at --cap of a core (a busy production primary: its one core is what
caps a project; on this 2-core machine the tracker's workers and wrk must be able to push well
past what one capped shard takes). Then `tracker serve` on the cluster, driven over HTTP by wrk
(benchmarks/wrk/shard_load.lua), for a project of 1, 2, 3 and 4 shards:

- claims/s at multi=1 and multi=10 (claimed items stay out), and items/s claimed and done
  (each claim's items reported done by the thread's next request);
- Redis CPU per claim on each shard's node (used_cpu_sys+used_cpu_user from INFO cpu, divided
  by the items that left that node's todo sets), and how often its cgroup was throttled;
- the end of a project: the 4-shard project with its shards' todo sets emptied one by one
  (claims that fall through the empty shards), down to none (404s that visit all of them);
- uncapped, side by side in the same run: one-shard projects on a standalone Redis (today's
  layout) and on the cluster, served by this tracker and, with `--before SRC`, by the tracker
  before sharding: CPU per claim and per claimed-and-done item.

The load is HTTP through `tracker serve` (48 workers: a synchronous worker waits out a capped
shard's throttled part of a period, so it takes many to keep 4 shards fed), from wrk, which
stays under 0.15 of a core. The workers are what costs: 250-400 µs of CPU a request on this
shared 2-core machine, so the cap is 5% of a core (a 20 ms period, since the kernel's smallest
quota is 1 ms) and wrk keeps 16 connections: 4 shards at 10% each took ~2,500 claims/s, whose
workers filled both cores, and the 3- and 4-shard runs measured the machine, not Redis (the
runs at 10% and 192 connections are in the report's history). Each run's throttled share and
the machine's busy share say which held the rate. (Processes calling the Engine directly were
tried: in short runs their start-up cost more than the HTTP tier saves.)

Writes shard_scale.json and shard_scale.md (benchmarks/results/). Needs root (cgroup v1 cpu
controller), wrk, redis-server, redis-cli. Every cgroup it made is removed on the way out, on
failure too, and leftovers of a killed run are removed at the start.

    PYTHONPATH=benchmarks python -m harness --only shard_scale             # about 8 minutes
    PYTHONPATH=benchmarks python -m harness --only shard_scale --set cap=0.2 shard_counts=1,3
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import redis
from redis.crc import key_slot

from harness import Bench, case
from harness.redis import start_redis
from harness.results import BENCHMARKS, git_commit
from server_bench.run import machine, versions
from server_bench.servers import start_tracker
from tracker_api.server import worker_pids
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import stop
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

WRK_SCRIPT = BENCHMARKS / "wrk" / "shard_load.lua"
CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
CGROUP_PREFIX = "tracker-bench-"
PRIMARIES = 4
MULTI = 10
AIM_SHARE = 0.8  # of N times one shard's rate


@dataclass(frozen=True)
class Plan:
    shard_counts: tuple[int, ...]
    seconds: int  # each measured wrk run
    rounds: int  # every case once per round, in alternating order
    items_per_shard: int  # each shard holds at least this many before each run
    connections: int  # wrk keep-alive connections
    workers: int  # tracker serve's bjoern workers
    cap: float = 0.10  # share of a core each capped redis-server gets
    # A capped Redis runs for cap x period and then waits out the rest of the period, with every
    # worker that sent to it: with the default 100 ms a request waits up to 90 ms and a
    # synchronous worker with it, starving the other shards. The kernel's smallest quota is
    # 1 ms, so 10 ms is the shortest period that caps at 10% of a core.
    cfs_period_us: int = 10_000


FULL = Plan(
    shard_counts=(1, 2, 3, 4),
    seconds=8,
    rounds=2,
    items_per_shard=40_000,  # a capped shard hands out under 4,000 items a second (multi=10): never dry in 8 s
    connections=16,
    workers=48,
    cap=0.05,
    cfs_period_us=20_000,
)
# A smoke run (CI): every part once, its figures too short to quote.
QUICK = Plan(shard_counts=(1, 2), seconds=1, rounds=1, items_per_shard=3_000, connections=32, workers=8)


# --- cgroups ------------------------------------------------------------------------------------


class CpuCaps:
    """One cgroup v1 cpu group per redis-server, capped by cfs_quota_us; removed by remove_all.

    A quota is a ceiling, not a guarantee: on a machine where other work keeps both cores busy, a
    group of the default weight (cpu.shares 1024, one task's) got a fifth of what the same
    redis-server got outside any group (1-3k against 5-6k claims/s, uncapped, load average 15).
    Every group therefore gets WEIGHT, so that a capped Redis reaches its quota whatever else runs
    (it can take no more than the quota), and every redis-server of a run, the uncapped standalone
    ones included, is in a group alike so that side-by-side rows compare like with like."""

    WEIGHT = 10_240  # cpu.shares: ten ordinary tasks' worth

    def __init__(self, period_us: int):
        self.period_us = period_us
        self.groups: dict[int, Path] = {}
        self.capped: set[int] = set()  # ports that set() caps; the others stay uncapped

    @staticmethod
    def remove_stale() -> list[str]:
        """Remove groups a killed run left behind (their processes moved back to the root)."""
        removed = []
        for group in CGROUP_ROOT.glob(CGROUP_PREFIX + "*"):
            _empty_group(group)
            group.rmdir()
            removed.append(group.name)
        return removed

    def add(self, port: int, pid: int, capped: bool = True) -> None:
        group = CGROUP_ROOT / f"{CGROUP_PREFIX}{port}"
        group.mkdir()
        self.groups[port] = group
        if capped:
            self.capped.add(port)
        (group / "cpu.cfs_period_us").write_text(str(self.period_us))
        (group / "cpu.shares").write_text(str(self.WEIGHT))
        (group / "cgroup.procs").write_text(str(pid))  # every thread of the process

    def set(self, share: float | None) -> None:
        """Cap every capped group at SHARE of a core (None: uncapped)."""
        quota = -1 if share is None else int(share * self.period_us)
        if quota != -1 and quota < 1000:
            raise ValueError(f"a quota of {quota} µs is under the kernel's 1 ms: a longer period")
        for port in self.capped:
            (self.groups[port] / "cpu.cfs_quota_us").write_text(str(quota))

    def throttling(self) -> dict[int, tuple[int, int]]:
        """Port -> (periods, periods throttled) so far."""
        found = {}
        for port in self.capped:
            stat = dict(line.split() for line in (self.groups[port] / "cpu.stat").read_text().splitlines())
            found[port] = (int(stat["nr_periods"]), int(stat["nr_throttled"]))
        return found

    def remove_all(self) -> None:
        for group in self.groups.values():
            if group.exists():
                _empty_group(group)
                group.rmdir()
        self.groups.clear()
        self.capped.clear()


def _empty_group(group: Path) -> None:
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            (CGROUP_ROOT / "cgroup.procs").write_text(pid)
        except OSError:
            pass  # gone meanwhile


# --- Redis's accounting -------------------------------------------------------------------------


def node_snapshot(client: redis.Redis) -> dict:
    """One node's CPU, commands and items waiting in its todo sets (every project on it)."""
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    todo = sum(client.scard(key) for key in client.scan_iter(match="*}:todo", count=1000))
    return {
        "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        "commands": sum(int(s["calls"]) for s in stats.values()),
        "scripts": sum(
            int(s["calls"]) for name, s in stats.items() if name in ("cmdstat_evalsha", "cmdstat_fcall")
        ),
        # The day's uniques: a sharded project counts them on its first shard alone.
        "pfadd": int(stats.get("cmdstat_pfadd", {}).get("calls", 0)),
        "todo": todo,
    }


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all cores so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def tracker_source() -> dict:
    """Which tracker ran: this checkout's src (its commit, and whether src/ had changes not
    committed), or a copy elsewhere on PYTHONPATH (its commit from a COMMIT file beside src/, as
    `git archive COMMIT src` copies leave it), for when others are changing src/ meanwhile."""
    import tracker_core

    root = Path(tracker_core.__file__).resolve().parents[2]
    if root == BENCHMARKS.parent:
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"], capture_output=True, text=True
        )
        return {"path": "src/", "commit": git_commit(), "src_changed": bool(status.stdout.strip())}
    stamp = root / "COMMIT"
    return {
        "path": str(root),
        "commit": stamp.read_text().strip() if stamp.exists() else "unknown",
        "src_changed": False,
    }


# --- the setup ----------------------------------------------------------------------------------


def sharded_projects_exist() -> bool:
    return "shards" in inspect.signature(project_verbs.create).parameters


def slot_owners(client: redis.Redis) -> list[tuple[int, int, int]]:
    return [(start, end, int(node[1])) for start, end, node, *_ in client.execute_command("CLUSTER", "SLOTS")]


def owner(tag: str, owners: list[tuple[int, int, int]]) -> int:
    slot = key_slot(tag.encode())
    return next(port for start, end, port in owners if start <= slot <= end)


def name_on(port: int, stem: str, owners: list[tuple[int, int, int]]) -> str:
    """A project name from STEM whose hash tag lands on the primary at PORT."""
    for n in range(10_000):
        name = f"{stem}-{n}"
        if owner("{" + name + "}", owners) == port:
            return name
    raise LookupError(port)


@dataclass
class Case:
    """One project as the load sees it: the projects wrk claims from in turn (one, or the
    stand-ins), each shard's hash tag with its project, and the node each shard is on."""

    label: str
    shards: int
    projects: list[str]
    tags: dict[str, str]  # "{tag}" -> project
    ports: list[int]  # of each shard, in the tags' order


def seed(admin: AdminContext, project: str, count: int, first: int = 0) -> None:
    names = (f"https://{project}.example.com/page/{n:09d}?ref=bench" for n in range(first, first + count))
    item_verbs.add(admin, project, names, batch=10_000)


def shard_tags(admin: AdminContext, project: str) -> list[str]:
    """PROJECT's shards' hash tags, as its settings record them (one shard: {PROJECT})."""
    text = admin.conn.hget(ProjectKeys(project).settings, "shard_tags") or ""
    return text.split() or ["{" + project + "}"]


def make_case(admin: AdminContext, stem: str, shards: int, real: bool, owners) -> Case:
    """A project of SHARDS shards named from STEM (or SHARDS one-shard projects, one on each
    primary: the stand-in before sharded projects)."""
    ports = sorted({port for *_, port in owners})
    if real:
        name = f"{stem}{shards}"
        project_verbs.create(admin, name, {"max_multi": MULTI}, shards=shards)
        tags = {tag: name for tag in shard_tags(admin, name)}
        return Case(f"{shards} shard(s)", shards, [name], tags, [owner(t, owners) for t in tags])
    names = [name_on(ports[i], f"{stem}{shards}", owners) for i in range(shards)]
    for name in names:
        project_verbs.create(admin, name, {"max_multi": MULTI})
    return Case(
        f"{shards} one-shard project(s)", shards, names, {"{" + n + "}": n for n in names}, ports[:shards]
    )


class Supply:
    """The items of one Redis (or cluster): claims taken back after a run, todo kept full."""

    def __init__(self, url: str):
        self.admin = AdminContext.from_url(url)
        self.engine = Engine(url)
        self.next_number: dict[str, int] = {}
        self.seeded = 0
        self.seconds = 0.0

    def todo(self, case: Case) -> list[int]:
        return [self.admin.conn.scard(tag + ":todo") for tag in case.tags]

    def recycle(self, case: Case) -> None:
        """Give every claim of CASE back to todo (Engine.release, as an admin would)."""
        started = time.perf_counter()
        for tag, project in case.tags.items():
            while names := self.admin.conn.zrange(tag + ":out", 0, 9_999):
                self.engine.release(project, "", names)
        self.seconds += time.perf_counter() - started

    def top_up(self, case: Case, per_shard: int) -> None:
        """Seed until every shard of CASE holds PER_SHARD items (names spread over shards by
        their hash, so a sharded project gets a little more than it needs)."""
        started = time.perf_counter()
        while (missing := per_shard - min(self.todo(case))) > 0:
            for project in case.projects:
                count = missing * (case.shards if len(case.projects) == 1 else 1)
                count += count // 20 if len(case.projects) == 1 and case.shards > 1 else 0
                first = self.next_number.get(project, 0)
                seed(self.admin, project, count, first)
                self.next_number[project] = first + count
                self.seeded += count
        self.seconds += time.perf_counter() - started


def tracker_cpu_s(server_pid: int) -> float:
    """CPU seconds (user + system) of `tracker serve`'s workers so far."""
    total = 0
    for pid in worker_pids(server_pid):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


# --- one measured run ---------------------------------------------------------------------------


def run_wrk(port: int, mode: str, multi: int, names: list[str], plan: Plan) -> dict:
    command = [
        *("wrk", "-t2", "-c", str(plan.connections), "-d", f"{plan.seconds}s", "--timeout", "5s"),
        *("-s", str(WRK_SCRIPT), f"http://127.0.0.1:{port}/", "--", mode, str(multi), ",".join(names)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=plan.seconds + 60)
    found = {}
    for line in done.stdout.splitlines():
        for tag in ("BENCH_JSON ", "BENCH_COUNTS "):
            if line.startswith(tag):
                found[tag.strip()] = json.loads(line[len(tag) :])
    if done.returncode != 0 or len(found) != 2:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip() or done.stdout}")
    figures = found["BENCH_JSON"]
    return {
        "seconds": figures["duration_us"] / 1e6,
        "requests": figures["requests"],
        "p99_ms": figures["latency_us"]["p99"] / 1000,
        "socket_errors": sum(v for k, v in figures["errors"].items() if k != "status"),
        **found["BENCH_COUNTS"],
    }


@dataclass
class Target:
    """What a run drives and reads: the tracker's port and pid, the Redis nodes, their caps."""

    port: int
    pid: int
    clients: dict[int, redis.Redis]
    caps: CpuCaps | None
    supply: Supply


def measure(
    target: Target, case: Case, mode: str, multi: int, plan: Plan, per_shard: int | None = None
) -> dict:
    """One wrk run over CASE's projects (recycled and topped up to PER_SHARD items a shard
    first); its rates, and per node Redis's CPU and the items that left its todo sets."""
    if per_shard is not None:
        if target.caps:
            target.caps.set(None)
        target.supply.recycle(case)
        target.supply.top_up(case, per_shard)
        if target.caps:
            target.caps.set(plan.cap)
    clients, caps = target.clients, target.caps
    before = {port: node_snapshot(c) for port, c in clients.items()}
    throttled_before = caps.throttling() if caps else {}
    busy_before = machine_busy()
    children_before = os.times()
    tracker_before = tracker_cpu_s(target.pid)
    load = run_wrk(target.port, mode, multi, case.projects, plan)
    tracker_after = tracker_cpu_s(target.pid)
    children_after = os.times()
    busy_after = machine_busy()
    throttled_after = caps.throttling() if caps else {}
    after = {port: node_snapshot(c) for port, c in clients.items()}
    seconds = load["seconds"]
    nodes = []
    for port in clients:
        cpu_us = (after[port]["cpu_s"] - before[port]["cpu_s"]) * 1e6
        claimed = before[port]["todo"] - after[port]["todo"]
        if port not in case.ports and claimed == 0:
            continue  # a node this case left alone
        calls = after[port]["scripts"] - before[port]["scripts"]
        entry = {
            "port": port,
            "cpu_share": round(cpu_us / seconds / 1e6, 3),
            "items_claimed": claimed,
            "cpu_us_per_item": round(cpu_us / claimed, 1) if claimed else None,
            "cpu_us_per_script_call": round(cpu_us / calls, 1) if calls else None,
            "script_calls_per_s": round(calls / seconds),
            "pfadd_per_s": round((after[port]["pfadd"] - before[port]["pfadd"]) / seconds),
            "todo_left": after[port]["todo"],
        }
        if port in throttled_after:
            periods = throttled_after[port][0] - throttled_before[port][0]
            throttled = throttled_after[port][1] - throttled_before[port][1]
            entry["throttled_share"] = round(throttled / periods, 3) if periods else None
        nodes.append(entry)
    total_cpu_us = sum((after[p]["cpu_s"] - before[p]["cpu_s"]) * 1e6 for p in clients)
    requests = load["claims_ok"] + load["empty"] + load["dones_ok"] + load["other"]
    busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
    wrk_cpu = (children_after.children_user + children_after.children_system) - (
        children_before.children_user + children_before.children_system
    )
    claims = load["claims_ok"] + load["empty"]
    return {
        "case": case.label,
        "shards": case.shards,
        "mode": mode,
        "multi": multi,
        "seconds": round(seconds, 2),
        "claims_per_s": round(load["claims_ok"] / seconds, 1),
        "items_per_s": round(load["items"] / seconds, 1),
        "dones_per_s": round(load["dones_ok"] / seconds, 1),
        "empty_per_s": round(load["empty"] / seconds, 1),
        "other_statuses": load["other"],
        "socket_errors": load["socket_errors"],
        "p99_ms": load["p99_ms"],
        "redis_cpu_us_per_claim_request": round(total_cpu_us / claims, 1) if claims else None,
        "redis_cpu_us_per_item": round(total_cpu_us / load["items"], 1) if load["items"] else None,
        "redis_cpu_share": round(total_cpu_us / seconds / 1e6, 3),
        "worker_cpu_us_per_request": round((tracker_after - tracker_before) * 1e6 / requests, 1)
        if requests
        else None,
        "worker_cpu_share": round((tracker_after - tracker_before) / seconds, 3),
        "wrk_cpu_share": round(wrk_cpu / seconds, 3),
        "machine_busy_share": round(busy, 3),
        "nodes": nodes,
    }


# --- the whole run ------------------------------------------------------------------------------


def start_standalone(scratch: Path, label: str, plan: Plan, before: Path | None = None):
    """A standalone Redis (today's layout) with project "solo" and its own `tracker serve`
    (BEFORE: the tracker's src/ of an earlier commit instead of this one); (redis, tracker, target, case)."""
    name = "before" if before else "solo"
    server = start_redis(scratch / name, aof=False)
    supply = Supply(server.url)
    project_verbs.create(supply.admin, "solo", {"max_multi": MULTI})
    case = Case(label, 1, ["solo"], {"{solo}": "solo"}, [server.port])
    supply.top_up(case, plan.items_per_shard)
    tracker, port = start_tracker_from(server.url, scratch / f"{name}.log", plan.workers, before)
    client = {server.port: redis.Redis(port=server.port, decode_responses=True)}
    return server, tracker, Target(port, tracker.pid, client, None, supply), case


def start_tracker_from(url: str, log: Path, workers: int, src: Path | None):
    """`tracker serve` on URL, from SRC (a copy of src/ of another commit) when given."""
    saved = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = str(src)
    try:
        return start_tracker(url, log, workers)
    finally:
        if src:
            os.environ.pop("PYTHONPATH") if saved is None else os.environ.update(PYTHONPATH=saved)


def run(plan: Plan, bench: Bench, before: Path | None = None) -> dict:
    real = sharded_projects_exist()
    scratch = bench.tmp
    caps = CpuCaps(plan.cfs_period_us)
    stale = CpuCaps.remove_stale()
    servers, redises = [], []
    started = time.time()
    try:
        cluster = bench.cluster(PRIMARIES, aof=False)
        for node in cluster.nodes:
            caps.add(node.port, node.process.pid)
        caps.set(None)
        supply = Supply(cluster.url)
        found_versions = versions(supply.admin)
        owners = slot_owners(redis.Redis(port=cluster.nodes[0].port))
        cases = {n: make_case(supply.admin, "scale", n, real, owners) for n in plan.shard_counts}
        # The end of a project: the biggest case again, emptied shard by shard.
        end_case = make_case(supply.admin, "end", max(plan.shard_counts), real, owners) if real else None
        uncapped_case = make_case(supply.admin, "uncapped", 1, real, owners)
        for case in [*cases.values(), uncapped_case]:
            supply.top_up(case, plan.items_per_shard)
        tracker, port = start_tracker(cluster.url, scratch / "tracker.log", plan.workers)
        servers.append(tracker)
        clients = {node.port: redis.Redis(port=node.port, decode_responses=True) for node in cluster.nodes}
        capped = Target(port, tracker.pid, clients, caps, supply)
        # Uncapped, side by side: one-shard projects on a standalone Redis (with this tracker,
        # and with the one BEFORE sharding when given) and on the cluster.
        side = []
        for label, src in (
            (f"standalone Redis, tracker before sharding ({_stamp(before)})", before),
            ("standalone Redis, this tracker", None),
        ):
            if label.endswith("(None)"):
                continue
            server, process, target, case = start_standalone(scratch, label, plan, src)
            caps.add(server.port, server.process.pid, capped=False)
            redises.append(server)
            servers.append(process)
            side.append((target, case))
        if before:
            prior_case = make_case(supply.admin, "prior", 1, False, owners)
            supply.top_up(prior_case, plan.items_per_shard)
            prior_case.label = f"cluster, tracker before sharding ({_stamp(before)})"
            prior, prior_port = start_tracker_from(cluster.url, scratch / "prior.log", plan.workers, before)
            servers.append(prior)
            side.append((Target(prior_port, prior.pid, clients, None, supply), prior_case))
        side.append((Target(port, tracker.pid, clients, None, supply), uncapped_case))
        uncapped_case.label = "cluster, this tracker"
        seeded_s = round(time.time() - started, 1)

        # Unmeasured, uncapped: every worker connects to every node and counts every downloader
        # name in each project's uniques once (a worker's first claim of a name writes them).
        warm = Plan(**(plan.__dict__ | {"seconds": 1 if plan.rounds == 1 else 3}))
        for target, case in [*((capped, c) for c in (*cases.values(), end_case) if c), *side]:
            run_wrk(target.port, "claim", 1, case.projects, warm)
        runs = []
        for round_number in range(plan.rounds):
            caps.set(plan.cap)
            order = list(plan.shard_counts)
            if round_number % 2:
                order.reverse()
            for shards in order:
                for mode, multi in (("claim", 1), ("claim", MULTI), ("cycle", 1)):
                    entry = measure(capped, cases[shards], mode, multi, plan, plan.items_per_shard)
                    entry["round"] = round_number
                    runs.append(entry)
                    print(_line(entry), flush=True)
            caps.set(None)
            for target, case in side if round_number % 2 == 0 else side[::-1]:
                for mode in ("claim", "cycle"):
                    entry = measure(target, case, mode, 1, plan, plan.items_per_shard)
                    entry.update(round=round_number, uncapped=case.label)
                    runs.append(entry)
                    print(_line(entry), flush=True)

        end = []
        if end_case is not None:
            supply.recycle(end_case)
            supply.top_up(end_case, plan.items_per_shard)  # no top-up between its steps
            caps.set(plan.cap)
            end = end_of_project(capped, end_case, plan)
            caps.set(None)
        return {
            "plan": plan.__dict__,
            "sharded_projects": real,
            "before_sharding": _stamp(before),
            "cgroups_left_by_an_earlier_run": stale,
            "versions": found_versions,
            "items_seeded": sum({id(t.supply): t.supply.seeded for t, _ in [*side, (capped, None)]}.values()),
            "seconds_setting_up": seeded_s,
            "seconds_seeding_and_recycling": round(
                supply.seconds + sum(t.supply.seconds for t, _ in side[:-1]), 1
            ),
            "runs": runs,
            "end_of_project": end,
            "seconds_total": round(time.time() - started, 1),
        }
    finally:
        for process in servers:
            stop(process)
        for server in redises:
            server.stop()
        caps.remove_all()


def _stamp(src: Path | None) -> str | None:
    """The commit a copy of src/ came from (its COMMIT file beside it), or its path."""
    if src is None:
        return None
    stamp = Path(src).resolve().parent / "COMMIT"
    return stamp.read_text().strip() if stamp.exists() else str(src)


def end_of_project(target: Target, case: Case, plan: Plan) -> list[dict]:
    """CASE with its shards' todo sets emptied one by one, down to none: what falling through
    the empty shards costs each claim (Redis CPU over every node) and does to the rate."""
    found = []
    steps = range(case.shards + 1) if plan.rounds > 1 else (0, case.shards - 1, case.shards)
    emptied = 0
    for step in steps:
        while emptied < step:
            tag = list(case.tags)[case.shards - 1 - emptied]  # the first shard (no salt) stays longest
            target.supply.admin.conn.delete(tag + ":todo")
            emptied += 1
        entry = measure(target, case, "claim", 1, plan)
        entry["shards_with_items"] = case.shards - emptied
        found.append(entry)
        print(_line(entry), flush=True)
    return found


def _line(entry: dict) -> str:
    nodes = " ".join(
        f"[{n['cpu_share']:.2f} core {n['cpu_us_per_item']} us/item thr {n.get('throttled_share')}]"
        for n in entry["nodes"]
    )
    return (
        f"{entry['case'][:22]:<22} {entry['mode']:<5} m={entry['multi']:<2} claims/s {entry['claims_per_s']:>7.0f} "
        f"items/s {entry['items_per_s']:>7.0f} dones/s {entry['dones_per_s']:>6.0f} 404/s {entry['empty_per_s']:>6.0f} "
        f"redis {entry['redis_cpu_share']:.2f} workers {entry['worker_cpu_share']:.2f} "
        f"({entry['worker_cpu_us_per_request']} us/req) wrk {entry['wrk_cpu_share']:.2f} "
        f"busy {entry['machine_busy_share']:.2f} {nodes}"
    )


# --- the report ---------------------------------------------------------------------------------


def _rounds(values: list) -> str:
    """One figure per round, as "a / b"."""
    shown = [f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else f"{v}" for v in values]
    return " / ".join(shown) if shown else ""


def _median(values: list[float]) -> float:
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return 0.0
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def scaling_rows(results: dict) -> list[dict]:
    """Per shard count: each figure over the rounds, and its median's ratio to 0.8 x N x one shard's."""
    capped = [r for r in results["runs"] if "uncapped" not in r]
    counts = results["plan"]["shard_counts"]
    rows = []
    for shards in counts:
        mine = [r for r in capped if r["shards"] == shards]
        pick = {
            "claims_1": [r["claims_per_s"] for r in mine if r["mode"] == "claim" and r["multi"] == 1],
            "claims_10": [r["claims_per_s"] for r in mine if r["mode"] == "claim" and r["multi"] == MULTI],
            "items_10": [r["items_per_s"] for r in mine if r["mode"] == "claim" and r["multi"] == MULTI],
            "cycle": [r["dones_per_s"] for r in mine if r["mode"] == "cycle"],
        }
        claim_runs = [r for r in mine if r["mode"] == "claim" and r["multi"] == 1]
        per_node = [[n["cpu_us_per_item"] for n in r["nodes"]] for r in claim_runs]
        rows.append(
            {
                "shards": shards,
                **pick,
                "node_us": per_node,
                "throttled": [min((n.get("throttled_share") or 0) for n in r["nodes"]) for r in claim_runs],
                "workers": [r["worker_cpu_share"] for r in claim_runs],
                "busy": [r["machine_busy_share"] for r in claim_runs],
            }
        )
    one = rows[0] if rows and rows[0]["shards"] == 1 else None
    for row in rows:
        row["ratio"] = {
            key: round(_median(row[key]) / (AIM_SHARE * row["shards"] * _median(one[key])), 2)
            if one and _median(one[key])
            else None
            for key in ("claims_1", "claims_10", "cycle")
        }
    return rows


def verdicts(rows: list[dict]) -> list[str]:
    """One line per shard count past one: which aims the medians meet, and what held the rest
    back, read from the throttling (Redis at its cap or not) and the machine's busy share."""
    names = {"claims_1": "claims multi=1", "claims_10": "claims multi=10", "cycle": "claimed and done"}
    lines = []
    for row in rows:
        if row["shards"] == 1 or not any(row["ratio"].values()):
            continue
        met = [names[k] for k, v in row["ratio"].items() if v is not None and v >= 1]
        missed = [names[k] for k, v in row["ratio"].items() if v is not None and v < 1]
        throttled, busy = _median(row["throttled"]), _median(row["busy"])
        if not missed:
            why = ""
        elif throttled >= 0.85:
            why = " Every shard was at its cap: Redis itself costs more per claim than on one shard."
        elif busy >= 0.95:
            why = (
                f" Some shard was at its cap in only {throttled:.0%} of periods while the machine was "
                f"{busy:.0%} busy: the 2 cores (workers, wrk, other users' work), not Redis, held the rate."
            )
        else:
            why = (
                f" Some shard was at its cap in only {throttled:.0%} of periods with cores to spare: the "
                "workers waited on the other shards (each worker claims from them in turn)."
            )
        lines.append(
            f"- {row['shards']} shards: aim (at least 0.8 x N x one shard) met for "
            f"{', '.join(met) or 'none'}; missed for {', '.join(missed) or 'none'}.{why}"
        )
    return lines


def _load(results: dict) -> tuple[list, list]:
    """The load averages at the start and at the end (runs from before the harness kept a pair)."""
    load = results["load_average"]
    return (load["start"], load["end"]) if isinstance(load, dict) else (load[0], load[1])


def summary(results: dict) -> dict:
    """What a later run's report keeps of this one: when, which tracker, under what load, and
    per shard count the medians and their ratios to the aim."""
    return {
        "date": results["date"],
        "tracker_commit": results["tracker_source"]["commit"],
        "load_average": [_load(results)[0][0], _load(results)[1][0]],
        "rows": [
            {
                "shards": row["shards"],
                **{key: _median(row[key]) for key in ("claims_1", "claims_10", "cycle")},
                "ratio": row["ratio"],
                "throttled": _median(row["throttled"]),
            }
            for row in scaling_rows(results)
        ],
    }


def carried_history(previous: dict | None) -> list[dict]:
    """The summaries of earlier runs, newest first (five at most), for write_with_history."""
    if previous is None:
        return []
    return [summary(previous), *previous.get("history", [])][:5]


def history_lines(results: dict) -> list[str]:
    if not results.get("history"):
        return []
    lines = [
        "",
        "## Earlier runs",
        "",
        "Medians over each run's rounds; ratio to 0.8 x N x one shard in parentheses (m=1, m=10, done).",
        "",
        "| run | tracker | load average (start, end) | shards | claims/s m=1 | claims/s m=10 | "
        "items/s claimed and done | ratios | least throttled share (m=1) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for run in results["history"]:
        for row in run["rows"]:
            ratio = row["ratio"]
            lines.append(
                f"| {run['date']} | {run['tracker_commit']} | {run['load_average'][0]:.1f}, "
                f"{run['load_average'][1]:.1f} | {row['shards']} | {row['claims_1']:,.0f} | "
                f"{row['claims_10']:,.0f} | {row['cycle']:,.0f} | {ratio['claims_1']}, {ratio['claims_10']}, "
                f"{ratio['cycle']} | {row['throttled']:.2f} |"
            )
    return lines


def report(results: dict) -> str:
    plan = results["plan"]
    load = _load(results)
    real = results["sharded_projects"]
    source = results["tracker_source"]
    lines = [
        "# One project over Redis Cluster shards, each primary capped (issue 28)",
        "",
        f"`{results['command']}` on {results['date']} (tracker at commit {source['commit']}"
        + (" with src/ changes not committed" if source["src_changed"] else "")
        + f", benchmark at {results['commit']}; load average "
        f"{load[0][0]:.2f} / {load[0][1]:.2f} / {load[0][2]:.2f} at the start, {load[1][0]:.2f} at the end; "
        f"{results['machine_detail']['cpu_model']}, {results['machine'].get('cores') or results['machine'].get('cpus')} cores shared with other "
        f"work; Redis {results['versions']['redis']}), {results['seconds_total']:.0f} s.",
        "",
        (
            "A project of N shards (`tracker project create P --shards N`)."
            if real
            else "**Stand-in**: sharded projects did not exist at this commit, so an N-shard project is N "
            "one-shard projects, one on each primary, claimed in turn: it checks the caps and the "
            "linearity, not the fall-through (no end-of-project rows)."
        ),
        f"A Redis Cluster of {PRIMARIES} primaries (AOF off, as cpu.md), each redis-server in a cgroup of its own "
        f"capped at {plan['cap']:.0%} of a core (cpu.cfs_quota_us {int(plan['cap'] * plan['cfs_period_us'])} "
        f"of {plan['cfs_period_us']} µs), so that Redis is the bottleneck as on a busy production primary; "
        f"`tracker serve --workers {plan['workers']}` driven over HTTP by wrk (2 threads, {plan['connections']} "
        f"keep-alive connections, benchmarks/wrk/shard_load.lua), {plan['seconds']} s a run, "
        f"{plan['rounds']} round(s) in alternating order (figures are per round, `a / b`; ratios from the "
        "median). Every shard holds at least "
        f"{plan['items_per_shard']:,} URL-like names before each run (claims of the run before given back): "
        "no shard runs dry outside the end-of-project rows.",
        "",
        "## Scaling",
        "",
        "| shards | claims/s multi=1 | claims/s multi=10 (items/s) | items/s claimed and done | "
        "Redis CPU µs per claim, each shard (multi=1) | ratio to 0.8 x N x one shard (m=1, m=10, done) | "
        "least throttled share of periods (m=1) | workers' CPU, cores (m=1) | machine busy (m=1) |",
        "| ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- |",
    ]
    for row in scaling_rows(results):
        ratio = row["ratio"]
        lines.append(
            f"| {row['shards']} | {_rounds(row['claims_1'])} | {_rounds(row['claims_10'])} "
            f"({_rounds(row['items_10'])}) | {_rounds(row['cycle'])} | "
            + " / ".join(", ".join(f"{v:.0f}" for v in node if v) for node in row["node_us"])
            + f" | {ratio['claims_1']}, {ratio['claims_10']}, {ratio['cycle']} | {_rounds(row['throttled'])} | "
            f"{_rounds(row['workers'])} | {_rounds(row['busy'])} |"
        )
    lines += [
        "",
        "Redis CPU per claim is each shard's node's used_cpu_sys+used_cpu_user (INFO cpu) over the run "
        "divided by the items that left its todo sets. A throttled share near 1 says the capped Redis "
        "used its whole quota in nearly every period (Redis was the bottleneck); lower, the load did "
        "not reach it (workers stuck on another shard, or the machine's 2 cores busy: see the last "
        "columns, `machine busy` counting other users' work too).",
        "",
        *verdicts(scaling_rows(results)),
    ]
    if results["end_of_project"]:
        end = results["end_of_project"]
        base = end[0]
        lines += [
            "",
            "## The end of a project: claims that fall through empty shards",
            "",
            f"The {base['shards']}-shard project (capped as above), its shards' todo sets emptied one by one "
            "(the first shard last); multi=1 claims. Redis CPU per claim counts every node (the empty shards' "
            "script calls included); a 404 is a claim that found every shard empty.",
            "",
            "| shards with items | claims/s | 404/s | Redis CPU µs per request (all nodes) | more than all full | "
            "script calls per request | workers' CPU µs per request | p99 ms |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for entry in end:
            requests = entry["claims_per_s"] + entry["empty_per_s"]
            calls = sum(n["script_calls_per_s"] for n in entry["nodes"])
            extra = (
                f"{entry['redis_cpu_us_per_claim_request'] - base['redis_cpu_us_per_claim_request']:+.1f}"
                if entry["redis_cpu_us_per_claim_request"] is not None
                else ""
            )
            lines.append(
                f"| {entry['shards_with_items']} | {entry['claims_per_s']:,.0f} | {entry['empty_per_s']:,.0f} | "
                f"{entry['redis_cpu_us_per_claim_request']} | {extra} | "
                f"{calls / requests if requests else 0:.2f} | {entry['worker_cpu_us_per_request']} | "
                f"{'' if entry['p99_ms'] is None else round(entry['p99_ms'], 1)} |"
            )
    uncapped = [r for r in results["runs"] if "uncapped" in r]
    if uncapped:
        lines += [
            "",
            "## Uncapped, side by side (same run)",
            "",
            "One project of one shard, no cgroup cap, the same workers and wrk: on a standalone Redis "
            "(`redis://`, today's layout), by the tracker before sharding where given (`--before`) and by "
            "this one, and on the cluster. The cores are shared by Redis, the workers and wrk here, so the "
            "rates are the machine's, not Redis's; the CPU per request is the figure to compare (cpu.md, "
            "full load: 27.0 µs per `/request`, 46.7 per `/done`).",
            "",
            "| where | claims/s | Redis CPU µs per claim | workers' CPU µs per request | "
            "items/s claimed and done | Redis CPU µs per item claimed and done |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for label in dict.fromkeys(r["uncapped"] for r in uncapped):
            claims = [r for r in uncapped if r["uncapped"] == label and r["mode"] == "claim"]
            cycles = [r for r in uncapped if r["uncapped"] == label and r["mode"] == "cycle"]
            lines.append(
                f"| {label} | {_rounds([r['claims_per_s'] for r in claims])} | "
                f"{_rounds([r['redis_cpu_us_per_item'] for r in claims])} | "
                f"{_rounds([r['worker_cpu_us_per_request'] for r in claims])} | "
                f"{_rounds([r['dones_per_s'] for r in cycles])} | "
                f"{_rounds([r['redis_cpu_us_per_item'] for r in cycles])} |"
            )
    lines += [
        "",
        "A copy of src/ at a commit (for `--before`, or for the tracker under test on PYTHONPATH while "
        "others change src/): `git archive COMMIT src | tar -x -C DIR; echo COMMIT > DIR/COMMIT; "
        "cp src/tracker_core/*.so DIR/src/tracker_core/`, then `--before DIR/src` or "
        "`PYTHONPATH=DIR/src`; the report names the commit from DIR/COMMIT.",
        "",
        f"Items seeded: {results['items_seeded']:,}; seeding and giving claims back took "
        f"{results['seconds_seeding_and_recycling']} s. Figures of every run (per node: CPU, items, "
        "script calls, PFADDs, throttling; workers' and wrk's CPU) are in shard_scale.json.",
        *history_lines(results),
        "",
    ]
    return "\n".join(lines)


@case("shard_scale", report=report, history=carried_history, needs=("wrk", "redis-cli"), root=True)
def run_case(bench: Bench) -> dict:
    """One project over 1 to 4 Redis Cluster shards, each Redis capped by a cgroup (root)."""
    if not os.access(CGROUP_ROOT / "cgroup.procs", os.W_OK):
        raise SystemExit(f"needs the cgroup v1 cpu controller at {CGROUP_ROOT}")
    base = QUICK if bench.quick else FULL
    plan = Plan(**{knob.name: bench.size(knob.name, getattr(base, knob.name)) for knob in fields(Plan)})
    # src/ of the tracker before sharding (`git archive COMMIT src`, a COMMIT file beside src/):
    # its one-shard CPU per request measured side by side.
    before = bench.size("before", "")
    # A TERM (a CI timeout) unwinds like Ctrl-C, so the cgroups and servers are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    figures = run(plan, bench, Path(before) if before else None)
    return {"machine_detail": machine(), "tracker_source": tracker_source(), **figures}
