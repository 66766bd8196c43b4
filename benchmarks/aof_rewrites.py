"""How often Redis rewrites its AOF under the tracker's traffic, what the rewrites cost, and what a
restart then replays: the trade `auto-aof-rewrite-min-size` sets.

Redis rewrites its AOF (a fork, then a child writing the whole dataset) once the file passes
`auto-aof-rewrite-min-size` and has grown `auto-aof-rewrite-percentage` (100%) past its size
after the last rewrite. A claim and its done append about 1.8 KB (aof_bytes.py) while the
dataset barely changes (an item moves from a queue to `done`), so a project whose dataset is
smaller than the minimum is rewritten every time the file grows by the minimum: with Redis's
64 MB default, every 3-4 seconds at 10,000 items a second. Each fork stops Redis for a few ms
(a tail latency) and each rewrite takes a core for a while. A larger minimum spaces them out;
the price is disk and a longer replay of the AOF when Redis restarts (503 until it has loaded).

For each minimum (MB), a fresh Redis as the tracker runs it (embedded: AOF on, everysec) holding
a project of ITEMS items, its AOF compacted; then every item claimed and reported done through
the engine, one after the other; then Redis killed (-9) and started again from its AOF. Per run:
rewrites (forks), the rewrites' CPU (`used_cpu_*_children`), the AOF grown, and the restart.

    .venv/bin/python benchmarks/aof_rewrites.py [--items 300000] [--min-mb 64 512] [--out DIR]

Writes benchmarks/results/aof_rewrites.json and .md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import redis
from server_bench.results_file import run_header, write_results

from server_bench.redis_aof import compact_aof, wait_for_aof_written, wait_for_rewrite
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

RESULTS = Path(__file__).with_name("results")
PROJECT = "aof"
BATCH = 10_000  # items added per admin call
REWRITE_TIMEOUT_S = 300.0  # a rewrite of 300,000 done items takes seconds, on a busy disk more


def children_cpu_s(conn) -> float:
    info = conn.info("cpu")
    return float(info["used_cpu_user_children"]) + float(info["used_cpu_sys_children"])


def one_run(min_mb: int, count: int, scratch: Path) -> dict:
    data = Path(tempfile.mkdtemp(prefix=f"aof-{min_mb}-", dir=scratch))
    try:
        figures = measure(data, min_mb, count)
    finally:
        shutil.rmtree(data, ignore_errors=True)  # up to the minimum's AOF: not kept for the next
    return {"min_mb": min_mb, "items": count, **figures}


def measure(data: Path, min_mb: int, count: int) -> dict:
    """Load COUNT items into a Redis on DATA rewriting its AOF past MIN_MB, claim and finish
    each, then kill Redis and start it again from its AOF."""
    extra = ["--auto-aof-rewrite-min-size", f"{min_mb}mb"]
    server = EmbeddedRedis(data, extra=extra).start()
    try:
        conn = redis.Redis.from_url(server.url)
        admin = AdminContext.from_url(server.url)
        project_verbs.create(admin, PROJECT)
        names = [f"https://example.com/{min_mb}/{i}?q=%20x#f" for i in range(count)]
        for start in range(0, count, BATCH):
            item_verbs.add(admin, PROJECT, names[start : start + BATCH])
        compact_aof(conn, REWRITE_TIMEOUT_S)
        base = conn.info("persistence")["aof_current_size"]
        forks, children = conn.info("stats")["total_forks"], children_cpu_s(conn)
        engine = Engine(server.url)
        started = time.monotonic()
        for i in range(count):
            downloader = f"warrior{i % 500}"
            status, got = engine.claim(PROJECT, downloader, f"10.0.{i % 200}.1", 1)
            if status != 200:
                raise RuntimeError(f"claim {i} answered {status}")
            engine.done(PROJECT, downloader, "1", got, ["example.com", 123_456], "{}", "10.0.0.1")
        seconds = time.monotonic() - started
        wait_for_rewrite(conn, REWRITE_TIMEOUT_S)  # one under way when the loop ended counts in full
        rewrites = conn.info("stats")["total_forks"] - forks
        rewrite_cpu = children_cpu_s(conn) - children
        # What the test measures is the replay, not the AOF window: a kill while Redis postpones
        # writing its buffer (a busy disk, CI's) would lose acknowledged dones (docs/faults.md).
        wait_for_aof_written(conn)
        size_at_kill = conn.info("persistence")["aof_current_size"]
        server.process.kill()  # a crash: the restart replays the AOF as it stands
        server.process.wait()
    finally:
        server.stop()  # nothing to do once killed
    restart_started = time.monotonic()
    restarted = EmbeddedRedis(data, extra=extra).start(timeout_s=600)
    try:
        restart_s = time.monotonic() - restart_started
        left = redis.Redis.from_url(restarted.url).scard(ProjectKeys(PROJECT).done)
    finally:
        restarted.stop()
    if left != count:
        raise RuntimeError(f"the restarted Redis holds {left} done items of {count}")
    return {
        "seconds": round(seconds, 2),
        "items_per_s": round(count / seconds),
        "aof_base_mb": round(base / 1e6, 1),
        "rewrites": rewrites,
        "items_per_rewrite": round(count / rewrites) if rewrites else None,
        "rewrite_cpu_s": round(rewrite_cpu, 3),
        "rewrite_cpu_us_per_item": round(rewrite_cpu / count * 1e6, 2),
        "aof_mb_at_restart": round(size_at_kill / 1e6, 1),
        "restart_s": round(restart_s, 2),
    }


def markdown(result: dict) -> str:
    lines = [
        "# AOF rewrites under claims and dones, by `auto-aof-rewrite-min-size`",
        "",
        f"`{result['command']}` on {result['date']} (commit {result['commit']}; load average "
        f"{result['load_average'][0]:.2f} at the start). Every item claimed and reported done "
        "through the engine, one after the other; the rewrites' CPU is Redis's children's.",
        "",
        "| min size | items | items/s | rewrites | items per rewrite | rewrites' CPU µs per item "
        "| AOF at the restart MB | restart s |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in result["runs"]:
        lines.append(
            f"| {run['min_mb']} MB | {run['items']:,} | {run['items_per_s']:,} | {run['rewrites']} | "
            f"{run['items_per_rewrite'] or '-'} | {run['rewrite_cpu_us_per_item']} | "
            f"{run['aof_mb_at_restart']} | {run['restart_s']} |"
        )
    lines += [
        "",
        "A restart replays what the AOF holds: at most about the minimum plus the dataset, so the "
        "restart column of a run ending just before its next rewrite is the worst case.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=300_000)
    parser.add_argument("--min-mb", type=int, nargs="+", default=[64, 512])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="aof-rewrites-") as scratch:
        runs = [one_run(min_mb, args.items, Path(scratch)) for min_mb in args.min_mb]
    result = {**run_header("benchmarks/aof_rewrites.py", argv, load), "runs": runs}
    write_results(args.out, "aof_rewrites", result, markdown(result))
    return result


if __name__ == "__main__":
    main()
