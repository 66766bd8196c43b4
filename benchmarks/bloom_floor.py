"""What a Bloom filter inside a Redis script can cost at best: the price of one bit operation.

At a 1e-6 false-positive rate every item tests or sets about 20 bits, so the Redis time per item
of any Lua Bloom filter is at least 20 x (the cost of one bit operation in a script) plus the
cost of receiving its arguments. This measures both on the project's own embedded Redis, with
the shapes a backfeed script could take for a batch of 400 items x 20 bits:

- a script that only receives the batch's arguments (8,400 of them, as bloom_add gets them);
- 8,000 GETBIT calls (one per bit), 8,000 SETBIT calls;
- BITFIELD_RO with all 8,000 GET operations in 8 calls (Lua unpacks a few thousand values
  at most), and in 400 calls of 20;
- BITFIELD with all 8,000 SET operations in 8 calls (a batched test-and-set);
- the blocked filter's calls (one 64-byte block per item, see bloom_blocked.py): one GETRANGE, and
  one GETRANGE plus one SETRANGE, per item, with the byte offsets passed as text (ARGV strings) and
  as Lua numbers: ``redis.call`` prints every number argument with ``%.17g``, which costs more than
  the call itself.

Figures are script time from INFO commandstats (EVALSHA), per item of the batch. Writes
benchmarks/results/bloom_floor.json. About 20 seconds.

    .venv/bin/python benchmarks/bloom_floor.py
"""

from __future__ import annotations

import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import redis

from tracker_core.infra.embedded import EmbeddedRedis, free_port

RESULTS = Path(__file__).resolve().parent / "results"
ITEMS, BITS_PER_ITEM, BITMAP_BITS = 400, 20, 28_800_000
ROUNDS = 40

# Each script gets the bitmap as KEYS[1] and, like bloom_add, per item: the entry, then its 20
# bit positions (ARGV[1] and ARGV[2] are the counts).
_POSITIONS = "local i = 3 for _ = 1, tonumber(ARGV[1]) do for j = i + 1, i + 20 do {body} end i = i + 21 end"
SCRIPTS = {
    "arguments only": "return 1",
    "GETBIT per bit": _POSITIONS.format(body="redis.call('GETBIT', KEYS[1], ARGV[j])") + " return 1",
    "SETBIT per bit": _POSITIONS.format(body="redis.call('SETBIT', KEYS[1], ARGV[j], 1)") + " return 1",
    "BITFIELD_RO, 8 calls of 1,000 GET": """
        local ops, n = {}, 0
        local i = 3
        for _ = 1, tonumber(ARGV[1]) do
          for j = i + 1, i + 20 do ops[n + 1] = 'GET'; ops[n + 2] = 'u1'; ops[n + 3] = ARGV[j]; n = n + 3 end
          i = i + 21
        end
        for s = 1, n, 3000 do redis.call('BITFIELD_RO', KEYS[1], unpack(ops, s, math.min(n, s + 2999))) end
        return 1""",
    "BITFIELD_RO, one call of 20 GET per item": """
        local ops = {}
        for j = 1, 20 do ops[3 * j - 2] = 'GET'; ops[3 * j - 1] = 'u1' end
        local i = 3
        for _ = 1, tonumber(ARGV[1]) do
          for j = 1, 20 do ops[3 * j] = ARGV[i + j] end
          redis.call('BITFIELD_RO', KEYS[1], unpack(ops))
          i = i + 21
        end
        return 1""",
    "BITFIELD, 8 calls of 1,000 SET (test-and-set)": """
        local ops, n = {}, 0
        local i = 3
        for _ = 1, tonumber(ARGV[1]) do
          for j = i + 1, i + 20 do
            ops[n + 1] = 'SET'; ops[n + 2] = 'u1'; ops[n + 3] = ARGV[j]; ops[n + 4] = '1'; n = n + 4
          end
          i = i + 21
        end
        for s = 1, n, 4000 do redis.call('BITFIELD', KEYS[1], unpack(ops, s, math.min(n, s + 3999))) end
        return 1""",
}


# The blocked shapes get per item: the entry, the block's first and its last byte offset (text).
_BLOCKS = 56_250  # 28.8M bits in 64-byte blocks
_PER_BLOCK = "local i = 3 for _ = 1, tonumber(ARGV[1]) do local first, last = ARGV[i + 1], ARGV[i + 2] {body} i = i + 3 end"
BLOCK_SCRIPTS = {
    "GETRANGE of a 64-byte block per item (offsets as text)": _PER_BLOCK.format(
        body="redis.call('GETRANGE', KEYS[1], first, last)"
    )
    + " return 1",
    "GETRANGE of a 64-byte block per item (offsets as Lua numbers)": _PER_BLOCK.format(
        body="redis.call('GETRANGE', KEYS[1], tonumber(first), tonumber(last))"
    )
    + " return 1",
    "GETRANGE + SETRANGE of a 64-byte block per item (text)": _PER_BLOCK.format(
        body="redis.call('SETRANGE', KEYS[1], first, redis.call('GETRANGE', KEYS[1], first, last))"
    )
    + " return 1",
}


def block_batch_args(rng: random.Random) -> list:
    args: list = [ITEMS, 0]
    for n in range(ITEMS):
        first = rng.randrange(_BLOCKS) * 64
        args += [b"https://example.com/item/%d" % n, str(first), str(first + 63)]
    return args


def batch_args(rng: random.Random) -> list:
    args: list = [ITEMS, BITS_PER_ITEM]
    for n in range(ITEMS):
        args.append(b"https://example.com/item/%d" % n)
        args.extend(rng.randrange(BITMAP_BITS) for _ in range(BITS_PER_ITEM))
    return args


def measure(r: redis.Redis) -> dict:
    rng = random.Random(1)
    per_bit = [batch_args(rng) for _ in range(ROUNDS)]
    per_block = [block_batch_args(rng) for _ in range(ROUNDS)]
    r.setbit("bitmap", BITMAP_BITS, 1)
    figures = {}
    shapes = [(name, source, per_bit) for name, source in SCRIPTS.items()]
    shapes += [(name, source, per_block) for name, source in BLOCK_SCRIPTS.items()]
    for name, source, batches in shapes:
        sha = r.script_load(source)
        r.evalsha(sha, 1, "bitmap", *batches[0])  # warm up
        r.config_resetstat()
        for args in batches:
            r.evalsha(sha, 1, "bitmap", *args)
        usec = r.info("commandstats")["cmdstat_evalsha"]["usec"]
        per_item = usec / (ROUNDS * ITEMS)
        figures[name] = {"us_per_item": round(per_item, 2), "items_per_s_at_this_cost": round(1e6 / per_item)}
    args_us = figures["arguments only"]["us_per_item"]
    for name, f in figures.items():
        if name != "arguments only" and name not in BLOCK_SCRIPTS:
            f["us_per_bit_operation"] = round((f["us_per_item"] - args_us) / BITS_PER_ITEM, 3)
    return figures


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), port=free_port()).start()
        try:
            r = redis.Redis.from_url(server.url)
            results = {
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "machine": {
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                    "redis": r.info("server")["redis_version"],
                    "load_average_1min": round(__import__("os").getloadavg()[0], 2),
                },
                "batch": {"items": ITEMS, "bits_per_item": BITS_PER_ITEM, "rounds": ROUNDS},
                "figures": measure(r),
            }
        finally:
            server.stop()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bloom_floor.json").write_text(json.dumps(results, indent=2) + "\n")
    for name, f in results["figures"].items():
        print(f"{name:46} {f['us_per_item']:7.2f} µs/item  {f.get('us_per_bit_operation', '')}")


if __name__ == "__main__":
    main()
