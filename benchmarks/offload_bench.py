"""Load many short items into a project with offloading on; drain them all through claims.

Redis memory (used_memory) must stay under --budget-mb while loading and draining, and every
item must be claimed exactly once. The maintenance pass (the same code `tracker maintain` runs)
is called between load batches and claims. Writes results/offload.json.

The issue asks for 50 million items; on the 2-core shared machine this was written on, loading
and draining run at a few hundred thousand items/s together, so the default is 2 million
(about a minute). Pass --items 50000000 on a machine with the time.

    .venv/bin/python benchmarks/offload_bench.py [--items 2000000] [--budget-mb 64]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from tracker_core import offload
from tracker_core.admin import Admin
from tracker_core.embedded import EmbeddedRedis, free_port
from tracker_core.engine import Engine
from tracker_core.keys import ProjectKeys

RESULTS = Path(__file__).with_name("results") / "offload.json"
P = "big"
LOAD_BATCH = 100_000
CLAIM_MULTI = 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=2_000_000)
    parser.add_argument("--budget-mb", type=float, default=64)
    parser.add_argument("--high", type=int, default=200_000)
    parser.add_argument("--low", type=int, default=50_000)
    parser.add_argument("--segment-items", type=int, default=100_000)
    args = parser.parse_args()
    k = ProjectKeys(P)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis", port=free_port())
        server.start()
        segments = Path(tmp) / "segments"
        try:
            admin, engine = Admin.from_url(server.url), Engine(server.url)
            r = admin.r
            admin.create_project(P, offload_high=str(args.high), offload_low=str(args.low),
                                 offload_segment_items=str(args.segment_items), done_mode="discard")
            peak = 0

            def sample():
                nonlocal peak
                peak = max(peak, int(r.info("memory")["used_memory"]))

            t0 = time.perf_counter()
            for start in range(0, args.items, LOAD_BATCH):
                names = [f"{i:x}" for i in range(start, min(start + LOAD_BATCH, args.items))]
                list(admin.add_items(P, names, batch=LOAD_BATCH))
                offload.maintain_project(r, P, segments)
                sample()
            load_s = time.perf_counter() - t0
            loaded = admin.status(P)
            disk_bytes = sum(p.stat().st_size for p in (segments / P).iterdir())

            t0 = time.perf_counter()
            claimed = 0
            seen = bytearray(args.items)          # one byte per item: claimed exactly once?
            twice = 0
            refilled_order = []
            while True:
                status, items = engine.claim(P, "bench", "127.0.0.1", CLAIM_MULTI)
                if status != 200:
                    before = set(offload.registry(r, k))
                    moved = offload.maintain_project(r, P, segments)
                    refilled_order += sorted(before - set(offload.registry(r, k)))
                    sample()
                    if moved["refilled"] == 0:
                        break
                    continue
                for name in items:
                    i = int(name, 16)
                    twice += seen[i]
                    seen[i] = 1
                claimed += len(items)
                engine.done(P, "bench", "1", items, [], "")
                if claimed % (50 * CLAIM_MULTI) == 0:
                    before = set(offload.registry(r, k))
                    offload.maintain_project(r, P, segments)
                    refilled_order += sorted(before - set(offload.registry(r, k)))
                    sample()
            drain_s = time.perf_counter() - t0
            final = admin.status(P)
        finally:
            server.stop()
    result = {
        "command": " ".join(["benchmarks/offload_bench.py", *sys.argv[1:]]),
        "python": platform.python_version(), "items": args.items, "watermarks":
            {"high": args.high, "low": args.low, "segment_items": args.segment_items},
        "budget_mb": args.budget_mb, "peak_used_memory_mb": round(peak / 2**20, 1),
        "under_budget": peak < args.budget_mb * 2**20,
        "after_load": {"todo": loaded["queues"]["todo"], "offloaded": loaded["offloaded"],
                       "segment_bytes_on_disk": disk_bytes},
        "load_s": round(load_s, 1), "load_items_per_s": round(args.items / load_s),
        "drain_s": round(drain_s, 1), "drain_items_per_s": round(claimed / drain_s),
        "claimed": claimed, "claimed_twice": twice, "never_claimed": args.items - sum(seen),
        # The Bloom filter (1e-6 false positives) may drop a new name as already seen at load.
        "dropped_as_duplicate_at_load": loaded["counters"].get("items_duplicate", 0),
        "segments_refilled_in_order": refilled_order == sorted(refilled_order),
        "left_after_drain": final["todo_total"] + final["offloaded"], "done_counter": final["done"],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
