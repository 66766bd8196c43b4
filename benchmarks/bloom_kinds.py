"""Backfeed's dedup filter, each kind: Redis and worker CPU per item, and the false-positive rate
of a real filter filled to its design capacity.

Issue 16 asks for at most 5 µs of Redis CPU per new item at 1e-6 false positives within 35 bits
per item. Measured here, in alternating rounds on one Redis:

- ``before``: bloom_add as it was at commit BEFORE (its Lua read from git): one GETBIT per bit
  and one BITFIELD per new item, layered k = 20;
- ``layered``: today's bloom_add on a layered filter (k = 20, 29 bits per item): one BITFIELD
  per batch tests and sets every item's bits (``SET u1 <pos> 1`` answers the old bit);
- ``wide``: the same on a wide filter (k = 10, 35 bits per item);
- ``fingerprint-pairs-before``: a fingerprint filter of independent bucket pairs (3-byte
  fingerprints in one of two 8-slot buckets, 35 bits per item; every fingerprint filter made
  before blocks) with bloom_add as it was at commit FP_BEFORE: two GETRANGEs per item and one
  SETRANGE per new one;
- ``fingerprint-pairs``: the same filter with today's bloom_add;
- ``fingerprint``: a new fingerprint filter (blocked: an item's two buckets are two of one block
  of 16): one GETRANGE per item (from its lower bucket to its higher) and one SETRANGE per new one.

Each round adds ITEMS never-seen names through ``BloomFilter.add`` (400 a call, as backfeed
does), then the same names again (all seen). Per item: Redis main-thread CPU (INFO cpu: the
script, reading and parsing the call; never time off the CPU), the script's own time (INFO
commandstats: wall clock, so it counts waits for a core on a shared machine) and this process's
CPU (the worker's share: hashing, building the call, the socket).

False positives: a filter of each kind with the default geometry (1,000,000 items at 1e-6) is
filled to its capacity through bloom_add, its bitmap read back from Redis, and PROBES names it
never saw are checked against it (a sample also through Redis, which must agree). Reported
beside the count: the rate the filled state implies (Bloom: fill ratio ^ k; fingerprints: the
fingerprints an absent name meets in its two buckets on average, over the fingerprint count):
what a uniformly hashed absent name sees, far less noisy than the count; and the design's.

Instructions (``--instructions``): the same adds on a redis-server under valgrind's callgrind,
which counts what the server executes per new and per seen item (reading the call off the
socket, the script, its replies): a figure the machine's load cannot move, for the fingerprint
shapes (3 batches of 400, after one warm-up batch).

Writes benchmarks/results/bloom_kinds.json. About ten minutes (``--quick``: a smoke run).

    .venv/bin/python benchmarks/bloom_kinds.py [--quick] [--before REV] [--instructions]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import redis

from callgrind_redis import CALL_TIMEOUT_S, redis_under_callgrind, total_instructions
from tracker_core import scripts
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import bloom
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts import binding, loading

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
BATCH = bloom.BATCH
BEFORE = "920842e"  # the last commit whose bloom_add sent one GETBIT per bit
FP_BEFORE = "08a56af"  # the last commit before blocked fingerprint filters
SHAPES = {
    "before": bloom.LAYERED,
    "layered": bloom.LAYERED,
    "wide": bloom.WIDE,
    "fingerprint-pairs-before": bloom.FINGERPRINT,
    "fingerprint-pairs": bloom.FINGERPRINT,
    "fingerprint": bloom.FINGERPRINT,
}
PAIRS = {"fingerprint-pairs-before", "fingerprint-pairs"}  # fingerprint filters without blocks
FP_KINDS = ("layered", "wide", "fingerprint-pairs", "fingerprint")  # false positives of these


def old_script(rev: str) -> scripts.Script:
    """bloom_add as it was at REV, inlined as the loader does."""
    path = "src/tracker_core/lua/bloom_add-n.lua"
    text = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=REPO, check=True, capture_output=True, text=True
    )
    source = loading.inline(text.stdout)
    return scripts.Script("bloom_add", -1, source, hashlib.sha1(source.encode()).hexdigest())


@contextmanager
def script_in_use(script: scripts.Script | None, kinds: bool = False):
    """Run bloom_add as SCRIPT (None: today's) for the block's duration. The script before kinds
    (KINDS false) took no ARGV[10] (the kind): the call drops it."""
    if script is None:
        yield
        return
    today_run = binding.run  # what every binding sends through

    def before_run(conn, name, keys, args):
        if name != "bloom_add":
            return today_run(conn, name, keys, args)
        if not kinds:
            args = (*args[:9], *args[10:])
        return conn.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)

    binding.run = before_run
    try:
        yield
    finally:
        binding.run = today_run


def _names(items: int, tag: str) -> list:
    return [b"https://example.com/page/%d/item?q=%%20#%s" % (n, tag.encode()) for n in range(items)]


def _main_thread_cpu(r: redis.Redis) -> float:
    cpu = r.info("cpu")
    return cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]


def _geometry(shape: str, capacity: int = bloom.DEFAULT_CAPACITY) -> bloom.Geometry:
    return bloom.Geometry(capacity=capacity, kind=SHAPES[shape], block=0 if shape in PAIRS else None)


def _filter(admin: AdminContext, url: str, name: str, shape: str, capacity: int) -> bloom.BloomFilter:
    project_verbs.create(admin, name)
    keys = ProjectKeys(name)
    bloom.configure(admin.conn, keys, _geometry(shape, capacity))
    return bloom.BloomFilter(RawRedis(url), keys)


def _add_all(filt: bloom.BloomFilter, names: list) -> tuple[int, int]:
    new = seen = 0
    for i in range(0, len(names), BATCH):
        result = filt.add(names[i : i + BATCH])
        assert result.status == bloom.OK, result
        new, seen = new + result.new, seen + result.seen
    return new, seen


def one_round(admin: AdminContext, url: str, shape: str, items: int, run: int, before, fp_before) -> dict:
    r = admin.conn
    filt = _filter(admin, url, f"{shape}{run}", shape, bloom.DEFAULT_CAPACITY)
    names = _names(items, f"{shape}{run}")
    figures = {}
    script = {"before": before, "fingerprint-pairs-before": fp_before}.get(shape)
    with script_in_use(script, kinds=shape != "before"):
        filt.plan()  # the geometry read once, as a long-lived worker has it
        for phase in ("new", "seen"):
            r.config_resetstat()
            redis_cpu, own_cpu = _main_thread_cpu(r), time.process_time()
            new, seen = _add_all(filt, names)
            own_cpu, redis_cpu = time.process_time() - own_cpu, _main_thread_cpu(r) - redis_cpu
            assert (new, seen) == ((items, 0) if phase == "new" else (0, items)), (phase, new, seen)
            figures[phase] = {
                "redis_cpu_us": round(redis_cpu * 1e6 / items, 2),
                "script_us": round(r.info("commandstats")["cmdstat_evalsha"]["usec"] / items, 2),
                "worker_cpu_us": round(own_cpu * 1e6 / items, 2),
            }
    return figures


def costs(admin: AdminContext, url: str, items: int, runs: int, before, fp_before, shapes) -> list:
    """Every shape RUNS times in alternating rounds (the machine is shared: the spread shows its noise)."""
    rounds: dict = {shape: [] for shape in shapes}
    for run in range(runs):
        for shape in shapes:
            rounds[shape].append(one_round(admin, url, shape, items, run, before, fp_before))
    rows = []
    for shape, figures in rounds.items():
        layer = _geometry(shape).layer(0)
        row = {"shape": shape, "kind": SHAPES[shape], "k": layer.k, "slot_bytes": layer.slot_bytes}
        row.update(items=items, runs=runs)
        for phase in ("new", "seen"):
            for measure in ("redis_cpu_us", "script_us", "worker_cpu_us"):
                values = [f[phase][measure] for f in figures]
                row[f"{phase}_item_{measure}"] = {"median": statistics.median(values), "all": values}
        rows.append(row)
    return rows


def _dump_total(path: Path) -> int:
    for _ in range(600):
        if path.exists() and re.search(r"^totals: \d+", text := path.read_text(errors="replace"), re.M):
            return total_instructions(text)
        time.sleep(0.1)
    raise RuntimeError(f"no callgrind dump at {path}")


def instructions(shape: str, script, batches: int = 3) -> dict:
    """Instructions redis-server executes per new and per seen item of SHAPE (callgrind counting
    only while it reads and runs commands; its counters zeroed before each phase and dumped after)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        with redis_under_callgrind("processInputBuffer", out, Path(tmp)) as (server, url):
            conn = redis.Redis.from_url(url, socket_timeout=CALL_TIMEOUT_S)
            admin = AdminContext.from_url(url)
            if script is not None:
                conn.script_load(script.source)
            project_verbs.create(admin, "cg")
            keys = ProjectKeys("cg")
            geometry = bloom.Geometry(**{**_geometry(shape).__dict__, "salt": "0123456789abcdef" * 2})
            bloom.configure(admin.conn, keys, geometry)
            filt = bloom.BloomFilter(RawRedis(url), keys)
            names = _names(BATCH * (batches + 1), f"cg-{shape}")
            figures = {}
            with script_in_use(script, kinds=shape != "before"):
                filt.plan()
                _add_all(filt, names[:BATCH])  # warm-up: the script loaded, the keys made
                for dump, phase in enumerate(("new", "seen"), start=1):
                    subprocess.run(
                        ["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True
                    )
                    new, seen = _add_all(filt, names[BATCH:])
                    assert (new if phase == "new" else seen) == BATCH * batches, (phase, new, seen)
                    subprocess.run(
                        ["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True
                    )
                    total = _dump_total(Path(f"{out}.{dump}"))
                    figures[f"{phase}_item_instructions"] = round(total / (BATCH * batches))
            return {"shape": shape, "batches": batches, **figures}


def _all_set(bitmap: bytes, args: list, k: int) -> list[bool]:
    out, i = [], 0
    while i < len(args):
        out.append(all(bitmap[p >> 3] & (0x80 >> (p & 7)) for p in args[i + 2 : i + 2 + k]))
        i += 2 + k
    return out


def _in_buckets(table: bytes, args: list, slot_bytes: int) -> list[bool]:
    """Per name of a one-layer fingerprint filter's ARGS: is its fingerprint in one of its buckets?"""
    out = []
    for i in range(0, len(args), 7):
        s1, e1, s2, e2, fingerprint = args[i + 2 : i + 7]
        out.append(
            bloom._holds(table[s1 : e1 + 1], fingerprint) or bloom._holds(table[s2 : e2 + 1], fingerprint)
        )
    return out


def _in_block(table: bytes, args: list, slot_bytes: int) -> list[bool]:
    """Per name of a one-layer blocked fingerprint filter's ARGS: is its fingerprint in one of its buckets?"""
    out, bucket = [], slot_bytes * bloom.BUCKET_SLOTS
    for i in range(0, len(args), 5):
        low, high, fingerprint = args[i + 1 : i + 4]
        span = table[low : high + 1]
        out.append(bloom._holds(span[:bucket], fingerprint) or bloom._holds(span[-bucket:], fingerprint))
    return out


def _member(plan: bloom.Plan, table: bytes, layer: bloom.Layer):
    """Whether each name in a list is in the filter, read locally from TABLE (its one chunk)."""
    if plan.blocked:
        return lambda names: _in_block(
            table, bloom.block_args(names, names, plan.hash_plan), layer.slot_bytes
        )
    if plan.fingerprints:
        return lambda names: _in_buckets(
            table, bloom.fingerprint_args(names, names, plan.hash_plan), layer.slot_bytes
        )
    return lambda names: _all_set(table, bloom.script_args(names, names, plan.hash_plan), layer.k)


def _implied_rate(r: redis.Redis, plan: bloom.Plan, key: str, layer: bloom.Layer, items: int) -> tuple:
    """(how full the layer is, the false-positive rate that implies for a uniformly hashed name)."""
    if plan.fingerprints:
        load = items / (layer.buckets * bloom.BUCKET_SLOTS)
        return load, bloom.fingerprint_rate(layer.slot_bytes, load)
    fill = r.bitcount(key) / layer.bits
    return fill, fill**layer.k


def false_positives(admin: AdminContext, url: str, kind: str, capacity: int, probes: int) -> dict:
    """Fill a KIND (a shape) filter of CAPACITY items through bloom_add, then probe names it never saw."""
    start = time.perf_counter()
    filt = _filter(admin, url, f"fp-{kind}", kind, capacity)
    plan = filt.plan()
    layer = plan.layers[0]
    assert layer.chunks == 1 and len(plan.layers) == 1
    redis_cpu = _main_thread_cpu(admin.conn)
    new, _ = _add_all(filt, [b"present-%d" % n for n in range(capacity)])
    redis_cpu = _main_thread_cpu(admin.conn) - redis_cpu
    # A new name taken for seen while filling is a false positive too (about 0.3 expected in a
    # million at 1e-6 at capacity: the rate grows with the fill); counted, not fatal.
    fill_false_positives = capacity - new
    # The stash's memory (MEMORY USAGE: the set with its overhead) counts against the 35 bits.
    stash_bytes = (admin.conn.memory_usage(plan.chunk_keys[-1]) or 0) if plan.fingerprints else 0
    key = plan.chunk_keys[0]
    stashed = admin.conn.scard(plan.chunk_keys[-1]) if plan.fingerprints else 0
    table = redis.Redis.from_url(url).get(key).ljust(math.ceil(layer.chunk_bits / 8), b"\0")
    member = _member(plan, table, layer)
    hits, step = 0, 20_000
    for i in range(0, probes, step):
        hits += sum(member([b"absent-%d" % n for n in range(i, min(probes, i + step))]))
    sample = [b"absent-%d" % n for n in range(20_000)]
    in_redis = sum(sum(filt.contains_many(sample[i : i + 2000])) for i in range(0, len(sample), 2000))
    assert stashed or in_redis == sum(member(sample)), (in_redis, sum(member(sample)))
    fill, implied = _implied_rate(admin.conn, plan, key, layer, new)
    # Poisson bound (95%) on the rate the count allows.
    upper = (hits + 1.96 * math.sqrt(hits) + 2) / probes
    return {
        "kind": kind,
        "capacity": capacity,
        "items_in": int(admin.conn.hget(filt.keys.bloom, "items")),
        "k": layer.k,
        "slot_bytes": layer.slot_bytes,
        "block": layer.block,
        "stashed": stashed,
        "bits_per_item": round(layer.bits / capacity, 3),
        "bitmap_bytes_in_redis": admin.conn.strlen(key),
        "layer_rate_designed": layer.fp_rate,
        "fill_ratio_or_bucket_load": round(fill, 5),
        "rate_from_filled_state": implied,
        "absent_probed": probes,
        "false_positives": hits,
        "measured_rate": hits / probes,
        "measured_rate_upper_95": upper,
        "false_positives_while_filling": fill_false_positives,
        "stash_bytes_in_redis": stash_bytes,
        "bits_per_item_with_stash": round((layer.bits + 8 * stash_bytes) / capacity, 3),
        "fill_redis_cpu_us_per_item": round(redis_cpu * 1e6 / capacity, 2),
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    parser.add_argument("--before", default=BEFORE, help="commit whose bloom_add is 'before'")
    parser.add_argument(
        "--fp-before", default=FP_BEFORE, help="commit whose bloom_add is 'fingerprint-pairs-before'"
    )
    parser.add_argument(
        "--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES), help="costs of these only"
    )
    parser.add_argument("--no-fp", action="store_true", help="skip the false-positive runs")
    parser.add_argument(
        "--instructions", action="store_true", help="also count redis-server instructions (callgrind)"
    )
    parser.add_argument("--no-costs", action="store_true", help="skip the CPU time rounds")
    parser.add_argument("--out", default="bloom_kinds.json", help="file name under benchmarks/results")
    options = parser.parse_args()
    items, runs, capacity, probes = (
        (4_000, 1, 50_000, 200_000) if options.quick else (40_000, 5, 1_000_000, 10_000_000)
    )
    before, fp_before = old_script(options.before), old_script(options.fp_before)
    counted = []
    if options.instructions:
        for shape in ("fingerprint-pairs-before", "fingerprint-pairs", "fingerprint"):
            script = fp_before if shape == "fingerprint-pairs-before" else None
            counted.append(instructions(shape, script))
            print(counted[-1], flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), port=free_port(), extra=["--appendonly", "no"]).start()
        try:
            admin = AdminContext.from_url(server.url)
            admin.conn.script_load(before.source)
            admin.conn.script_load(fp_before.source)
            machine = {
                "python": platform.python_version(),
                "redis": admin.conn.info("server")["redis_version"],
                "cpus": os.cpu_count(),
                "load_average_1min_at_start": round(os.getloadavg()[0], 2),
                "compiled_hashing": bloom.COMPILED,
            }
            cost_rows = (
                []
                if options.no_costs
                else costs(admin, server.url, items, runs, before, fp_before, options.shapes)
            )
            kinds = [] if options.no_fp else FP_KINDS
            rates = [false_positives(admin, server.url, kind, capacity, probes) for kind in kinds]
        finally:
            server.stop()
    machine["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    results = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        "before": options.before,
        "fp_before": options.fp_before,
        "batch": BATCH,
        "target": {"redis_cpu_us_per_new_item": 5, "fp_rate": 1e-6, "bits_per_item": 35},
        "redis_cost": cost_rows,
        "false_positive_rate": rates,
        "redis_instructions": counted,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / options.out).write_text(json.dumps(results, indent=2) + "\n")
    for c in cost_rows:
        figures = ", ".join(f"{key} {c[key]['median']}" for key in c if key.endswith("_us"))
        print(f"{c['shape']:11} k={c['k']:2} per item (medians of {c['runs']}): {figures}")
    for f in rates:
        print(
            f"{f['kind']:11} k={f['k']} {f['bits_per_item']} bits/item, {f['items_in']:,} items in:"
            f" {f['false_positives']} of {f['absent_probed']:,} absent ({f['measured_rate']:.2e}),"
            f" from the filled state {f['rate_from_filled_state']:.2e}, designed {f['layer_rate_designed']:.1e};"
            f" {f['false_positives_while_filling']} seen while filling, {f['stashed']} stashed"
            f" ({f['bits_per_item_with_stash']} bits/item with the stash)"
        )


if __name__ == "__main__":
    main()
