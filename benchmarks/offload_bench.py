"""Load many short items into a project with offloading on; drain them all through claims.

What the issue asks: 50 million short items, Redis memory under a configured budget, and the
whole queue draining in order through claims. Here:

- The project's Bloom filter is sized for --items up front (as `tracker backfeed filter
  --capacity N` does), so it is one layer at 1e-6: about 3.6 bytes per item, allocated at once.
  The budget counts it: budget = Bloom filter bytes + --queue-budget-mb for everything else
  (queues up to the watermarks, the staging set, done up to its watermark, logs, scripts).
  Redis's own used_memory_peak is compared with it, not a sample.
- Loading runs the same script every way in runs (bloom_add: test-and-set plus SADD), from
  --loaders threads over raw hiredis connections, 400 items a call (bloom.BATCH); while it
  runs, a real `tracker maintain` process offloads todo beyond the high watermark.
- Draining claims --multi items a call and marks them done (done_mode=offload: done items
  beyond done_offload_high go to segment files too) while the same maintain process refills
  todo below the low watermark. Every item must be claimed exactly once (a byte per item);
  segments must come back oldest first; the mean load position of the items claimed in each
  tenth of the drain shows how close to FIFO the drain is.
- A short sample of the CLI's path (the items.add verb over redis-py, as `tracker items add`
  does) is timed beside it; --probe-only times each load path at 1 and at 6 filter layers
  (load_probes in the results), to show where loading time goes beyond the script.

Runtime, measured on the 2-core machine the results were written on (results/offload.json):
35 million items took 42 minutes (load 21k items/s, 28 min, its first 10 min shared with
another benchmark; drain 42k items/s, 14 min). The load is bound by Redis running bloom_add
(28-40 us of script time per item here), the drain by the claim and done scripts, so 50
million items take about an hour on such a machine. --probe-only takes about 2 minutes.

    .venv/bin/python benchmarks/offload_bench.py --items 35000000     # what the results hold
    .venv/bin/python benchmarks/offload_bench.py --probe-only          # adds load_probes
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tracker_core import bloom, offload
from tracker_core.admin import census, items, projects
from tracker_core.admin.context import AdminContext
from tracker_core.embedded import EmbeddedRedis, free_port
from tracker_core.engine import Engine
from tracker_core.keys import ProjectKeys
from tracker_core.rawredis import RawRedis

RESULTS = Path(__file__).with_name("results") / "offload.json"
P = "big"
CLI_SAMPLE = 100_000


def load(url: str, k: ProjectKeys, total: int, loaders: int) -> dict:
    """Add items 0..TOTAL-1 (hex names) through the Bloom filter from LOADERS threads."""
    lock = threading.Lock()
    cursor = [0]
    counts = {"new": 0, "seen": 0, "script_s": 0.0}

    def work():
        conn = RawRedis(url)
        seen_filter = bloom.BloomFilter(conn, k)
        new = seen = 0
        while True:
            with lock:
                start = cursor[0]
                cursor[0] = min(total, start + bloom.BATCH)
            if start >= total:
                break
            names = [f"{i:x}" for i in range(start, min(start + bloom.BATCH, total))]
            result = seen_filter.add(names, target=k.todo)
            if result.status != bloom.OK:
                raise RuntimeError(f"bloom_add failed: {result.status}")
            new, seen = new + result.new, seen + result.seen
        with lock:
            counts["new"] += new
            counts["seen"] += seen

    threads = [threading.Thread(target=work) for _ in range(loaders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def cli_path_sample(url: str, n: int) -> dict:
    """Time the items.add verb (redis-py, what `tracker items add` runs) on N items of a new project."""
    admin = AdminContext.from_url(url)
    projects.create(admin, "clisample")
    names = [f"cli-{i:x}" for i in range(n)]
    t0 = time.perf_counter()
    items.add(admin, "clisample", names, batch=5000)
    wall = time.perf_counter() - t0
    projects.delete(admin, "clisample")
    return {"items": n, "items_per_s": round(n / wall)}


def load_probes(url: str, n: int = 100_000) -> dict:
    """Where loading time goes: the same N adds through each client, at 1 and at 6 layers.

    A filter left at its default size grows a layer each time it fills (1M, 2M, 4M... items),
    and every layer adds its k bit positions to each item's script arguments and a probe to
    its test: 50M items reach 6 layers. A filter of capacity 10k reaches 6 layers (with the
    same k per layer) after 310k items, so its cost per item is measured here cheaply.
    """
    admin = AdminContext.from_url(url)
    r = admin.conn
    out = {}

    def measure(label, project, capacity, prefill, run):
        projects.create(admin, project)
        k = ProjectKeys(project)
        bloom.configure(r, k, bloom.Geometry(capacity=capacity), replace=True)
        if prefill:
            load(url, k, prefill, 2)
        names = [f"p-{i:x}" for i in range(n)]
        before = script_time_us(r).get("evalsha", {"usec": 0})["usec"]
        t0 = time.perf_counter()
        run(project, k, names)
        wall = time.perf_counter() - t0
        usec = script_time_us(r)["evalsha"]["usec"] - before
        layers = int(r.hget(k.bloom, "layers") or 1)
        out[label] = {
            "layers": layers,
            "items_per_s": round(n / wall),
            "redis_script_us_per_item": round(usec / n, 1),
            "client_us_per_item": round((wall * 1e6 - usec) / n, 1),
        }
        projects.delete(admin, project)

    def cli(project, k, names):  # what `tracker items add` runs (redis-py)
        items.add(admin, project, names, batch=5000)

    def raw(project, k, names):  # one raw hiredis connection, one thread
        seen_filter = bloom.BloomFilter(RawRedis(url), k)
        for i in range(0, len(names), bloom.BATCH):
            seen_filter.add(names[i : i + bloom.BATCH], target=k.todo)

    def raw2(project, k, names):  # two threads, each its own connection
        chunks = [names[i::2] for i in range(2)]
        threads = [threading.Thread(target=raw, args=(project, k, c)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    measure("cli_redis_py_1_layer", "probe1", 10 * n, 0, cli)
    measure("raw_1_thread_1_layer", "probe2", 10 * n, 0, raw)
    measure("raw_2_threads_1_layer", "probe3", 10 * n, 0, raw2)
    measure("cli_redis_py_6_layers", "probe4", 10_000, 310_000, cli)
    measure("raw_1_thread_6_layers", "probe5", 10_000, 310_000, raw)
    return out


def script_time_us(r) -> dict:
    """Redis-side time of the scripts so far, per call (INFO commandstats)."""
    stats = r.info("commandstats")
    out = {}
    for name in ("evalsha", "eval"):
        entry = stats.get(f"cmdstat_{name}")
        if entry:
            out[name] = {"calls": entry["calls"], "usec": entry["usec"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=50_000_000)
    parser.add_argument(
        "--queue-budget-mb", type=float, default=96, help="Redis memory allowed beyond the Bloom filter"
    )
    parser.add_argument("--high", type=int, default=500_000)
    parser.add_argument("--low", type=int, default=100_000)
    parser.add_argument("--segment-items", type=int, default=100_000)
    parser.add_argument("--done-mode", default="offload", choices=("offload", "discard"))
    parser.add_argument("--done-high", type=int, default=500_000)
    parser.add_argument("--loaders", type=int, default=2)
    parser.add_argument("--multi", type=int, default=1000)
    parser.add_argument("--maintain-interval", type=float, default=1.0)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--probe-only",
        action="store_true",
        help="Only time the load paths (load_probes) and add them to --results.",
    )
    args = parser.parse_args()
    if args.probe_only:
        with tempfile.TemporaryDirectory() as tmp:
            server = EmbeddedRedis(Path(tmp) / "redis", port=free_port())
            server.start()
            try:
                probes = load_probes(server.url)
            finally:
                server.stop()
        result = json.loads(args.results.read_text()) if args.results.exists() else {}
        result["load_probes"] = {
            "command": " ".join(["benchmarks/offload_bench.py", *sys.argv[1:]]),
            **probes,
        }
        args.results.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(probes, indent=2))
        return
    k = ProjectKeys(P)
    tracker = str(Path(sys.executable).with_name("tracker"))
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis", port=free_port())
        server.start()
        segments = Path(tmp) / "segments"
        maintain = None
        sampling = threading.Event()
        peak_sampled = [0]
        try:
            admin, engine = AdminContext.from_url(server.url), Engine(server.url)
            r = admin.conn
            # The data set: persistence off (the benchmark measures memory and throughput).
            r.config_set("appendonly", "no")
            r.config_set("save", "")
            cli_sample = cli_path_sample(server.url, CLI_SAMPLE)
            r.config_resetstat()
            base_mb = int(r.info("memory")["used_memory"]) / 2**20
            projects.create(
                admin,
                P,
                {
                    "offload_high": str(args.high),
                    "offload_low": str(args.low),
                    "offload_segment_items": str(args.segment_items),
                    "done_mode": args.done_mode,
                    "done_offload_high": str(args.done_high),
                    "max_multi": str(args.multi),
                    "log_maxlen": "1000",
                },
            )
            geometry = bloom.configure(r, k, bloom.Geometry(capacity=args.items), replace=True)
            bloom_bytes = geometry.bits_total() // 8
            budget = bloom_bytes + args.queue_budget_mb * 2**20

            def sample():
                while not sampling.wait(0.25):
                    try:
                        peak_sampled[0] = max(peak_sampled[0], int(r.info("memory")["used_memory"]))
                    except Exception:  # noqa: BLE001 - the sampler must not end the run
                        pass

            threading.Thread(target=sample, daemon=True).start()
            log = open(Path(tmp) / "maintain.log", "w")
            maintain = subprocess.Popen(
                [
                    tracker,
                    "--redis-url",
                    server.url,
                    "--data-dir",
                    tmp,
                    "maintain",
                    "--segments-dir",
                    str(segments),
                    "--interval",
                    str(args.maintain_interval),
                ],
                stdin=subprocess.DEVNULL,
                stderr=log,
            )

            t0 = time.perf_counter()
            loaded_counts = load(server.url, k, args.items, args.loaders)
            load_s = time.perf_counter() - t0
            load_scripts = script_time_us(r)
            # Let maintain bring todo down to the watermark before the drain starts.
            while r.scard(k.todo) > args.high or r.exists(k.offloading):
                time.sleep(0.1)
            loaded = census.status(admin, P)
            disk_bytes = sum(p.stat().st_size for p in (segments / P).iterdir())

            t0 = time.perf_counter()
            claimed = twice = starved = 0
            seen = bytearray(args.items)  # one byte per item: claimed exactly once?
            tenth = max(1, args.items // 10)
            position_sums = [0] * 11
            position_counts = [0] * 11
            in_order = True

            def todo_segments():
                return {n for n, q in offload.segment_sources(r, k).items() if q == "todo"}

            known = todo_segments()
            calls = 0
            while True:
                status, items = engine.claim(P, "bench", "127.0.0.1", args.multi)
                calls += 1
                if status != 200:
                    if offload.offloaded_count(r, k) == 0 and r.scard(k.todo) == 0:
                        break
                    starved += 1
                    time.sleep(0.02)
                    continue
                bucket = min(10, claimed // tenth)
                for name in items:
                    i = int(name, 16)
                    twice += seen[i]
                    seen[i] = 1
                    position_sums[bucket] += i
                position_counts[bucket] += len(items)
                claimed += len(items)
                engine.done(P, "bench", "1", items, [], "")
                if calls % 20 == 0:
                    now = todo_segments()
                    gone = known - now
                    if gone and now and max(gone) > min(now):
                        in_order = False
                    known = now
            drain_s = time.perf_counter() - t0
            while r.scard(k.done) > args.done_high or r.exists(k.offloading):
                time.sleep(0.1)  # the last done items go to disk
            final = census.status(admin, P)
            info = r.info("memory")
            peak = int(info["used_memory_peak"])
            maintain.terminate()
            maintain.wait(timeout=30)
            log.close()
            maintain_log = (Path(tmp) / "maintain.log").read_text().splitlines()
        finally:
            sampling.set()
            if maintain is not None and maintain.poll() is None:
                maintain.kill()
            server.stop()
    per_item_script_us = None
    if load_scripts.get("evalsha"):
        per_item_script_us = round(load_scripts["evalsha"]["usec"] / args.items, 1)
    result = {
        "command": " ".join(["benchmarks/offload_bench.py", *sys.argv[1:]]),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "items": args.items,
        "watermarks": {
            "high": args.high,
            "low": args.low,
            "segment_items": args.segment_items,
            "done_mode": args.done_mode,
            "done_offload_high": args.done_high,
        },
        "bloom": {
            "capacity": geometry.capacity,
            "fp_rate": geometry.fp_rate,
            "layers": geometry.layers,
            "mb": round(bloom_bytes / 2**20, 1),
            "bytes_per_item": round(bloom_bytes / args.items, 2),
        },
        "budget_mb": round(budget / 2**20, 1),
        "budget_is": "Bloom filter + queue budget (--queue-budget-mb)",
        "redis_used_memory_before_mb": round(base_mb, 1),
        "used_memory_peak_mb": round(peak / 2**20, 1),
        "used_memory_peak_sampled_mb": round(peak_sampled[0] / 2**20, 1),
        "used_memory_peak_beyond_bloom_mb": round((peak - bloom_bytes) / 2**20, 1),
        "under_budget": peak < budget,
        "after_load": {
            "todo": loaded["queues"]["todo"],
            "offloaded": loaded["offloaded"],
            "segments": loaded["segments"],
            "segment_bytes_on_disk": disk_bytes,
        },
        "load_s": round(load_s, 1),
        "load_items_per_s": round(args.items / load_s),
        "load_threads": args.loaders,
        "load_redis_script_us_per_item": per_item_script_us,
        "cli_path_items_per_s": cli_sample["items_per_s"],
        "drain_s": round(drain_s, 1),
        "drain_items_per_s": round(claimed / drain_s),
        "drain_claim_calls": calls,
        "drain_claims_starved": starved,
        "claimed": claimed,
        "claimed_twice": twice,
        "never_claimed": args.items - sum(seen),
        # The Bloom filter (1e-6 false positives) may drop a new name as already seen at load.
        "dropped_as_duplicate_at_load": loaded_counts["seen"],
        "segments_refilled_in_order": in_order,
        # Mean load position (0..1) of the items claimed in each tenth of the drain.
        "drain_mean_load_position_by_tenth": [
            round(s / c / args.items, 3) for s, c in zip(position_sums, position_counts) if c
        ],
        "left_after_drain": final["todo_total"] + final["offloaded"],
        "done_counter": final["done"],
        "done_after_drain": {"kept": final["done_kept"], "offloaded": final["done_offloaded"]},
        "maintain_log_lines": maintain_log[-5:],
    }
    args.results.parent.mkdir(exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
