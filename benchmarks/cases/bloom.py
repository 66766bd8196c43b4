"""Backfeed dedup figures: the engine path per Redis, the HTTP endpoint, and the Bloom fp rate.

- engine path: ``Backfeed.submit`` (hashing + one bloom_add script per 400 items, secret checked
  in the script) over one raw connection into one private redis-server: new items/s, then the
  same items again (all seen) items/s;
- HTTP: ``tracker serve`` (2 bjoern workers) taking 400-item posts from wrk with one connection
  per post, as warriors do: posts/s and latency, for new and for already-seen batches;
- false-positive rate at 1e-6: a first layer of 1M items filled through the same hashing (set
  locally, then stored in Redis as the layer's bitmap), then millions of absent items checked; a
  sample of them is also checked against Redis to show both agree.

Writes results/bloom.json and bloom.md. About a minute in all.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness import Bench, case
from harness.results import provenance_line
from server_bench.servers import start_tracker
from server_bench.wrk import run_wrk
from tracker_core.access import backfeed_secrets
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import stop
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import bloom, bloom_geometry, bloom_plan
from tracker_core.items.backfeed import Backfeed
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

BATCH = 400


def engine_path(url: str, admin: AdminContext, items: int) -> dict:
    project_verbs.create(admin, "engine")
    keys = ProjectKeys("engine")
    bloom.configure(admin.conn, keys, bloom.Geometry(capacity=max(items, 1_000_000)))
    _, secret = backfeed_secrets.create(admin.conn, keys)
    feed = Backfeed(Engine(url))
    names = [b"https://example.com/page/%d/item" % n for n in range(items)]
    figures = {}
    for phase in ("new", "seen"):
        admin.conn.config_resetstat()
        start = time.perf_counter()
        counted = 0
        for i in range(0, items, BATCH):
            batch = names[i : i + BATCH]
            outcome = feed.submit("engine", secret, batch, batch)
            counted += outcome.new if phase == "new" else outcome.seen
        elapsed = time.perf_counter() - start
        assert counted == items, (phase, counted)
        evalsha = admin.conn.info("commandstats").get("cmdstat_evalsha", {})
        figures[phase] = {
            "items": items,
            "seconds": round(elapsed, 3),
            "items_per_s": round(items / elapsed),
            "redis_us_per_item": round(evalsha.get("usec", 0) / items, 2),
        }
    return figures


def hashing_rate(items: int) -> dict:
    names = [b"https://example.com/page/%d/item" % n for n in range(items)]
    plan = bloom.Plan(ProjectKeys("x"), bloom.Geometry())
    start = time.perf_counter()
    for i in range(0, items, BATCH):
        bloom_plan.script_args(names[i : i + BATCH], names[i : i + BATCH], plan.hash_plan)
    return {"compiled": bloom_plan.COMPILED, "items_per_s": round(items / (time.perf_counter() - start))}


def http_endpoint(url: str, admin: AdminContext, seconds: int, log: Path) -> dict:
    project_verbs.create(admin, "web")
    keys = ProjectKeys("web")
    bloom.configure(admin.conn, keys, bloom.Geometry(capacity=20_000_000))
    _, secret = backfeed_secrets.create(admin.conn, keys)
    process, port = start_tracker(url, log)
    try:
        target = f"http://127.0.0.1:{port}/backfeed/legacy/web-{secret}"
        figures = {}
        for mode in ("new", "seen"):
            run = run_wrk(
                target, "backfeed.lua", connections=8, duration_s=seconds, close=True, script_args=(mode,)
            )
            run["items_per_s"] = round(run["requests_per_s"] * BATCH)
            figures[mode] = run
        stats = admin.conn.hgetall(keys.stats)
        figures["redis_counts"] = {f: int(v) for f, v in stats.items() if f.startswith("backfeed")}
        return figures
    finally:
        stop(process)


def _set_bits(bitmap: bytearray, args: list, k: int) -> None:
    i = 0
    while i < len(args):
        for p in args[i + 2 : i + 2 + k]:
            bitmap[p >> 3] |= 0x80 >> (p & 7)  # Redis numbers bits from the high end
        i += 2 + k


def _all_set(bitmap: bytearray, args: list, k: int) -> list[bool]:
    out, i = [], 0
    while i < len(args):
        out.append(all(bitmap[p >> 3] & (0x80 >> (p & 7)) for p in args[i + 2 : i + 2 + k]))
        i += 2 + k
    return out


def false_positive_rate(url: str, admin: AdminContext, capacity: int, absent: int) -> dict:
    project_verbs.create(admin, "fp")
    keys = ProjectKeys("fp")
    geometry = bloom.configure(admin.conn, keys, bloom.Geometry(capacity=capacity, fp_rate=1e-6))
    plan = bloom.Plan(keys, geometry)
    layer = plan.layers[0]
    assert layer.chunks == 1
    bitmap = bytearray((layer.chunk_bits + 7) // 8)
    start = time.perf_counter()
    step = 10_000
    for i in range(0, capacity, step):
        names = [b"present-%d" % n for n in range(i, min(capacity, i + step))]
        _set_bits(bitmap, bloom_plan.script_args(names, names, plan.hash_plan), layer.k)
    admin.conn.set(keys.bloom_chunk(0, 0), bytes(bitmap))
    admin.conn.hset(keys.bloom, mapping={"items": capacity, "n:0": capacity})
    hits = 0
    for i in range(0, absent, step):
        names = [b"absent-%d" % n for n in range(i, min(absent, i + step))]
        hits += sum(_all_set(bitmap, bloom_plan.script_args(names, names, plan.hash_plan), layer.k))
    # The same bits in Redis answer the same way (sample).
    sample = [b"absent-%d" % n for n in range(20_000)]
    filt = bloom.BloomFilter(RawRedis(url), keys)
    in_redis = sum(sum(filt.contains_many(sample[i : i + 2000])) for i in range(0, len(sample), 2000))
    local = sum(_all_set(bitmap, bloom_plan.script_args(sample, sample, plan.hash_plan), layer.k))
    assert in_redis == local, (in_redis, local)
    fill = sum(bin(b).count("1") for b in bitmap) / layer.bits
    return {
        "capacity": capacity,
        "k": layer.k,
        "layer_rate_designed": layer.fp_rate,
        "bits_per_item": round(layer.bits / capacity, 3),
        "theory_bits_per_item_at_1e-6": round(bloom_geometry.optimal_bits_per_item(1e-6), 3),
        "bitmap_bytes_in_redis": admin.conn.strlen(keys.bloom_chunk(0, 0)),
        "fill_ratio": round(fill, 4),
        "absent_checked": absent,
        "false_positives": hits,
        "measured_rate": hits / absent,
        "seconds": round(time.perf_counter() - start, 1),
    }


@case("bloom", report=lambda r: report(r), needs=("wrk",))
def run(bench: Bench) -> dict:
    """Backfeed dedup: the engine path per Redis, the HTTP endpoint, and the Bloom fp rate."""
    engine_items = bench.size("engine_items", 200_000, quick=4_000)
    http_s = bench.size("http_seconds", 5, quick=1)
    capacity = bench.size("capacity", 1_000_000, quick=20_000)
    absent = bench.size("absent", 5_000_000, quick=20_000)
    server = bench.redis()
    admin = AdminContext.from_url(server.url)
    results = {
        "batch": BATCH,
        "hashing": hashing_rate(bench.size("hashed_items", 200_000, quick=4_000)),
        "engine_path": engine_path(server.url, admin, engine_items),
        "http": http_endpoint(server.url, admin, http_s, bench.tmp / "serve.log"),
        "false_positive_rate": false_positive_rate(server.url, admin, capacity, absent),
    }
    results["headline"] = {
        "engine_new_items_per_s": results["engine_path"]["new"]["items_per_s"],
        "false_positive_rate": results["false_positive_rate"]["measured_rate"],
    }
    return results


def report(r: dict) -> str:
    e, h, fp = r["engine_path"], r["http"], r["false_positive_rate"]
    return "\n".join(
        [
            f"# Backfeed dedup ({r['machine']['cores']} shared cores)",
            "",
            provenance_line(r),
            "",
            f"- hashing (compiled={r['hashing']['compiled']}): {r['hashing']['items_per_s']:,} items/s",
            f"- engine path, one Redis, batches of {r['batch']}: new {e['new']['items_per_s']:,} items/s"
            f" (Redis {e['new']['redis_us_per_item']} µs/item in the script), seen"
            f" {e['seen']['items_per_s']:,} items/s (Redis {e['seen']['redis_us_per_item']} µs/item)",
            f"- HTTP, {r['batch']}-item posts, one connection per post, 2 workers: new"
            f" {h['new']['requests_per_s']:,} posts/s (p99 {h['new']['latency_ms'].get('p99')} ms),"
            f" seen {h['seen']['requests_per_s']:,} posts/s (p99 {h['seen']['latency_ms'].get('p99')} ms)",
            f"- false positives at 1e-6: {fp['false_positives']} of {fp['absent_checked']:,} absent items"
            f" (rate {fp['measured_rate']:.2e}; layer designed for {fp['layer_rate_designed']:.1e}) with"
            f" {fp['capacity']:,} items in, k={fp['k']}, {fp['bits_per_item']} bits/item"
            f" (theory {fp['theory_bits_per_item_at_1e-6']}), bitmap {fp['bitmap_bytes_in_redis']:,} bytes",
            "",
        ]
    )
