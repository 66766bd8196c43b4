"""A blocked Bloom filter for backfeed: its Redis cost per new item and the false-positive rate it gets.

Issue 16 asks for at most 5 µs of Redis CPU per new item at 1e-6 false positives within 35 bits per
item. The layered filter sets about 20 separate bits per item, and ``bloom_floor.py`` shows a bit
operation costs about 0.5 µs inside a script: 20 of them are over the budget before anything else.
A blocked filter puts all of an item's k bits in one block of B bits, so the script reads the block
once and writes it once. Measured here, for the script shape the filter would use:

- Redis cost: each item arrives as its entry and three strings per layer: a packed mask (one byte for the KEYS
  index of its chunk, then the block's B/32 words with the item's bits set) and the block's first
  and last byte offsets as text (a Lua number handed to ``redis.call`` is printed with ``%.17g``,
  about 0.6 µs each; text costs nothing). The script does one GETRANGE, tests
  ``band(block_word, mask_word) == mask_word`` for every word (unrolled: no tables, no loops) and,
  for a new item, one SETRANGE of the OR of both. Per item, for new items and for the same items
  again (all seen), at B = 512 and 1024 and for today's layered bloom_add beside them (each shape
  5 times, interleaved): Redis main-thread CPU (INFO cpu) and script time (INFO commandstats).
- False positives: the exact proposed hashing (FNV-1a of the name as today; murmur3 finalizer per
  layer for the block; k positions of log2(B) bits each cut from further finalizer outputs)
  simulated in pure Python: CAPACITY items set, then PROBES absent names tested. Reported: the
  count and rate, the expected rate from the filled bitmap (the mean over blocks of
  (bits set / B)^k: what a uniformly hashed absent item sees, with far less noise than the count)
  and the Poisson-model rate for the geometry.

Writes benchmarks/results/bloom_blocked.json. About six minutes (``--quick``: a smoke run).

    .venv/bin/python benchmarks/bloom_blocked.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import struct
import sys
import tempfile
import time
from pathlib import Path

import redis

from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.compiled._bloom_py import MASK64, SEED_A, SEED_B, SEED_C, fmix64, fnv1a64
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import bloom
from tracker_core.keyspace import ProjectKeys

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 400
LAYER_RATE = 0.9e-6  # the first layer's share of 1e-6 (the layered filter's tightening of 0.1)
# (block bits, bits per item, k): the candidates simulated.
CANDIDATES = [(512, 35, 16), (1024, 35, 18), (1024, 34, 18)]


def block_positions(fingerprint: int, seed: int, k: int, blocks: int, block_bits: int) -> tuple[int, list]:
    """(block, [k bit positions inside it]) of a hashed name in one layer; BLOCK_BITS a power of 2.

    Each position takes its own log2(BLOCK_BITS) bits of a finalizer output: double hashing
    (a + i*b) inside a block of 512 leaves only 2^18 bit patterns, and two names with the same
    pattern in one block collide far above 1e-6.
    """
    salt = (seed + 1) & MASK64
    a = fmix64(fingerprint ^ ((SEED_A * salt) & MASK64))
    block = fmix64(a ^ SEED_C) % blocks
    width = block_bits.bit_length() - 1
    per_word = 64 // width
    positions: list = []
    j = 0
    while len(positions) < k:
        j += 1
        h = fmix64((a + j * SEED_B) & MASK64)
        for _ in range(min(per_word, k - len(positions))):
            positions.append(h & (block_bits - 1))
            h >>= width
    return block, positions


def mask_words(positions, block_bits: int) -> list:
    """The block's 32-bit words with POSITIONS set, bits numbered from the high end as Redis does."""
    words = [0] * (block_bits // 32)
    for p in positions:
        words[p >> 5] |= 1 << (31 - (p & 31))
    return words


def lua_source(words: int) -> str:
    """The per-item loop of a blocked bloom_add for one layer (KEYS are the chunks)."""
    ms = ", ".join(f"m{w}" for w in range(1, words + 1))
    bs = ", ".join(f"b{w}" for w in range(1, words + 1))
    test = " or ".join(f"band(b{w}, m{w}) ~= m{w}" for w in range(1, words + 1))
    ors = ", ".join(f"bor(b{w}, m{w})" for w in range(1, words + 1))
    return f"""
local band, bor, unpk, pk = bit.band, bit.bor, struct.unpack, struct.pack
local mfmt, bfmt = '>I1' .. string.rep('i4', {words}), '>' .. string.rep('i4', {words})
local size = {words * 4}
local new, to_queue = 0, {{}}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local entry, packed, first, last = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local key, {ms} = unpk(mfmt, packed)
  local chunk = KEYS[key]
  local raw = redis.call('GETRANGE', chunk, first, last)
  if #raw < size then raw = raw .. string.rep('\\0', size - #raw) end  -- past the string's end
  local {bs} = unpk(bfmt, raw)
  if {test} then
    new = new + 1
    redis.call('SETRANGE', chunk, first, pk(bfmt, {ors}))
    to_queue[#to_queue + 1] = entry
  end
end
if #to_queue > 0 then redis.call('SADD', 'queue', unpack(to_queue)) end
return new"""


def batch_args(names, block_bits: int, blocks: int, k: int) -> list:
    size = block_bits // 8
    args: list = [len(names)]
    for name in names:
        block, positions = block_positions(fnv1a64(name), 0, k, blocks, block_bits)
        packed = struct.pack(f">B{block_bits // 32}I", 1, *mask_words(positions, block_bits))
        args += [name, packed, str(block * size), str(block * size + size - 1)]
    return args


def _names(items: int, run: int) -> list:
    return [b"https://example.com/page/%d/item?q=%%20#x%d" % (n, run) for n in range(items)]


def _main_thread_cpu(r: redis.Redis) -> float:
    cpu = r.info("cpu")
    return cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"]


def _phase(r: redis.Redis, items: int, expected: int, run) -> dict:
    """Run one phase (RUN returns the count of new items); its cost per item: script time
    (commandstats: wall clock inside EVALSHA, so it counts time the shared machine took away) and
    Redis main-thread CPU (INFO cpu: the script plus reading and parsing the calls, and never
    time spent off the CPU)."""
    r.config_resetstat()
    cpu = _main_thread_cpu(r)
    counted = run()
    cpu = _main_thread_cpu(r) - cpu
    assert counted == expected, (counted, expected)
    return {
        "script_us": round(r.info("commandstats")["cmdstat_evalsha"]["usec"] / items, 2),
        "cpu_us": round(cpu * 1e6 / items, 2),
    }


def redis_cost(r: redis.Redis, block_bits: int, k: int, items: int, run: int = 0) -> dict:
    blocks = math.ceil(items * 35 / block_bits)
    names = _names(items, run)
    batches = [batch_args(names[i : i + BATCH], block_bits, blocks, k) for i in range(0, items, BATCH)]
    r.delete("chunk", "queue")
    r.setrange("chunk", blocks * block_bits // 8, b"\0")  # full size, as a filter in use is
    sha = r.script_load(lua_source(block_bits // 32))
    figures = {}
    for phase, expected in (("new", items), ("seen", 0)):
        figures[phase] = _phase(
            r, items, expected, lambda: sum(r.evalsha(sha, 1, "chunk", *a) for a in batches)
        )
    assert r.scard("queue") == items
    return figures


def layered_cost(url: str, items: int, run: int) -> dict:
    """The filter in use today (bloom_add-n.lua, k = 20), same items, same Redis, same minute."""
    admin = AdminContext.from_url(url)
    name = f"layered{run}"
    project_verbs.create(admin, name)
    keys = ProjectKeys(name)
    bloom.configure(admin.conn, keys, bloom.Geometry(capacity=max(items, 1_000_000)))
    filt = bloom.BloomFilter(RawRedis(url), keys)
    names = _names(items, run)
    figures = {}
    r = redis.Redis.from_url(url)
    for phase, expected in (("new", items), ("seen", 0)):
        figures[phase] = _phase(
            r,
            items,
            expected,
            lambda: sum(filt.add(names[i : i + BATCH]).new for i in range(0, items, BATCH)),
        )
    return figures


def costs(url: str, items: int, runs: int) -> list:
    """Each shape RUNS times, interleaved (the machine is shared: the spread shows its noise)."""
    r = redis.Redis.from_url(url)
    shapes = {"layered (today)": [], "blocked B=512 k=16": [], "blocked B=1024 k=18": []}
    for run in range(runs):
        shapes["layered (today)"].append(layered_cost(url, items, run))
        shapes["blocked B=512 k=16"].append(redis_cost(r, 512, 16, items, run))
        shapes["blocked B=1024 k=18"].append(redis_cost(r, 1024, 18, items, run))
    out = []
    for name, figures in shapes.items():
        row = {"shape": name, "items": items, "runs": runs}
        for phase in ("new", "seen"):
            for measure in ("cpu_us", "script_us"):
                values = sorted(f[phase][measure] for f in figures)
                row[f"{phase}_item_{measure}"] = {
                    "min": values[0],
                    "median": values[len(values) // 2],
                    "all": values,
                }
        out.append(row)
    return out


def poisson_rate(bits_per_item: float, k: int, block_bits: int) -> float:
    """The rate the Poisson model of block loads predicts (the textbook blocked-filter formula)."""
    lam = block_bits / bits_per_item
    total = 0.0
    for load in range(0, int(lam * 6) + 40):
        weight = math.exp(-lam + load * math.log(lam) - math.lgamma(load + 1))
        total += weight * (1 - (1 - 1 / block_bits) ** (k * load)) ** k
    return total


def false_positives(block_bits: int, bits_per_item: int, k: int, capacity: int, probes: int) -> dict:
    start = time.perf_counter()
    blocks = math.ceil(capacity * bits_per_item / block_bits)
    bitmap = bytearray(blocks * block_bits // 8)
    for n in range(capacity):
        block, positions = block_positions(fnv1a64(b"present-%d" % n), 0, k, blocks, block_bits)
        base = block * block_bits
        for p in positions:
            bit = base + p
            bitmap[bit >> 3] |= 0x80 >> (bit & 7)
    hits = 0
    for n in range(probes):
        block, positions = block_positions(fnv1a64(b"absent-%d" % n), 0, k, blocks, block_bits)
        base = block * block_bits
        for p in positions:
            bit = base + p
            if not bitmap[bit >> 3] & (0x80 >> (bit & 7)):
                break
        else:
            hits += 1
    size = block_bits // 8
    expected = (
        sum(
            (sum(bin(b).count("1") for b in bitmap[i : i + size]) / block_bits) ** k
            for i in range(0, len(bitmap), size)
        )
        / blocks
    )
    # Poisson upper bound (95%) on the rate the count allows.
    upper = (hits + 1.96 * math.sqrt(hits) + 2) / probes
    return {
        "block_bits": block_bits,
        "k": k,
        "bits_per_item": round(blocks * block_bits / capacity, 3),
        "capacity": capacity,
        "absent_probed": probes,
        "false_positives": hits,
        "measured_rate": hits / probes,
        "measured_rate_upper_95": upper,
        "expected_rate_from_filled_bitmap": expected,
        "poisson_model_rate": poisson_rate(bits_per_item, k, block_bits),
        "within_first_layer_rate": expected <= LAYER_RATE,
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    options = parser.parse_args()
    cost_items, runs, capacity, probes = (
        (4_000, 1, 20_000, 100_000) if options.quick else (40_000, 5, 1_000_000, 10_000_000)
    )
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), port=free_port()).start()
        try:
            r = redis.Redis.from_url(server.url)
            machine = {
                "python": platform.python_version(),
                "redis": r.info("server")["redis_version"],
                "cpus": os.cpu_count(),
                "load_average_1min": round(os.getloadavg()[0], 2),
            }
            cost_rows = costs(server.url, cost_items, runs)
        finally:
            server.stop()
    rates = [false_positives(bits, per_item, k, capacity, probes) for bits, per_item, k in CANDIDATES]
    results = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine,
        "target": {
            "redis_cpu_us_per_new_item": 5,
            "fp_rate": 1e-6,
            "first_layer_rate": LAYER_RATE,
            "bits_per_item": 35,
        },
        "redis_cost": cost_rows,
        "false_positive_rate": rates,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bloom_blocked.json").write_text(json.dumps(results, indent=2) + "\n")
    for c in cost_rows:
        figures = ", ".join(f"{key} {c[key]['median']}" for key in c if key.endswith("_us"))
        print(f"{c['shape']:22} Redis µs per item (medians of {c['runs']}): {figures}")
    for f in rates:
        print(
            f"B={f['block_bits']:5} k={f['k']} {f['bits_per_item']} bits/item: {f['false_positives']} of"
            f" {f['absent_probed']:,} ({f['measured_rate']:.2e}), from the bitmap"
            f" {f['expected_rate_from_filled_bitmap']:.2e}, model {f['poisson_model_rate']:.2e}"
        )


if __name__ == "__main__":
    main()
