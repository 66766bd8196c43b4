"""What blocks cost the claim path: Redis CPU per claim script call, before and after CIDR blocks.

Runs the claim script (multi=1) over one raw connection to a private redis-server and reads
Redis's own accounting (INFO commandstats, cmdstat_evalsha usec_per_call: the time Redis spent
inside the script, the figure that caps one project). Alternating rounds over four cases, so a
noisy shared machine hits them alike:

- the claim script of revision BEFORE (one SMISMEMBER on a set of exact entries) and the
  current one (ZSCORE for the name, ZREVRANGEBYLEX for the address range), each
- with no blocks, and with 1,000 blocked names and 1,000 blocked IPv4 addresses in the
  project and as many global ones (the current script also gets 500 IPv4 and 500 IPv6 CIDR
  ranges); clients are never blocked, half IPv4 and half IPv6, so every lookup runs to the end.

The whole-claim figures move by +-10 us between rounds on a shared machine, more than blocks
cost; so the lookups alone are also timed: each way's commands run 200,000 times in one Lua loop
inside Redis (no network, no scheduling between calls), best of 5, against the same entries.

Writes benchmarks/results/claim_block_cost.json. Bounded: about a minute.

    .venv/bin/python benchmarks/claim_block_cost.py [BEFORE]   (a git revision; default 1db90d8)
"""

from __future__ import annotations

import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from claim_cost_breakdown import script_at
from tracker_core import scripts
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.scripts.sending import run as run_script

CLAIMS_PER_ROUND = 5_000
ROUNDS = 7
DOWNLOADERS = 1000
BEFORE = "1db90d8"  # the last claim-21.lua before blocks moved to the index
RESULTS = Path(__file__).with_name("results") / "claim_block_cost.json"


def client(n: int) -> tuple[str, str]:
    d = n % DOWNLOADERS
    ip = f"10.{d // 250}.{d % 250}.7" if d % 2 else f"2001:db8:{d:x}::7"
    return f"dl{d}", ip


def old_script(revision: str) -> scripts.Script:
    """The claim script of REVISION (claim_cost_breakdown.script_at), loaded as claim_before."""
    return dataclasses.replace(script_at(revision), name="claim_before")


def old_claim(engine: Engine, project: str, downloader: str, ip: str) -> int:
    """engine.claim as it was: KEYS[2] the set of exact entries, no ARGV[5]."""
    k = engine.keys(project)
    now_ms = engine._now_ms()
    # The old script took the same keys but for KEYS[2], the set of exact block entries.
    keys = list(scripts.claim.keys(k, downloader=downloader, now_ms=now_ms))
    keys[1] = k.blocked
    return run_script(engine.conn, "claim_before", keys, (now_ms, downloader, ip, 1))[0]


def usec_per_claim(engine: Engine, admin: AdminContext, project: str, before: bool, round_no: int) -> float:
    # New names each round: the Bloom filter drops names seen before.
    item_verbs.add(admin, project, [f"r{round_no}-{n}" for n in range(CLAIMS_PER_ROUND)])
    admin.conn.config_resetstat()
    for n in range(CLAIMS_PER_ROUND):
        if before:
            status = old_claim(engine, project, *client(n))
        else:
            status = engine.claim(project, *client(n), 1)[0]
        assert status == 200, (status, n, project)
    stats = admin.conn.info("commandstats")["cmdstat_evalsha"]
    k = engine.keys(project)
    admin.conn.delete(k.out, k.claims, k.reclaim_at, k.downloader_claims)
    return int(stats["usec"]) / int(stats["calls"])


def add_blocks(admin: AdminContext, project: str, before: bool) -> dict:
    names = [f"name:blocked-{n}" for n in range(2000)]
    ips = [f"ip:192.0.{n // 250}.{n % 250}" for n in range(2000)]
    cidrs = [f"ip:172.{16 + n // 250}.{n % 250}.0/24" for n in range(500)] + [
        f"ip:2001:db9:{n:x}::/48" for n in range(500)
    ]
    if before:
        # The old layout: global entries copied into the project's one set.
        admin.conn.sadd(admin.keys(project).blocked, *names, *ips)
        return {"names": len(names), "ips": len(ips)}
    # Half the names and addresses the project's own, half global, written in one step (what
    # limits.block does one entry at a time).
    own = set((names + ips)[1::2] + cidrs)
    copy = set((names + ips)[::2])
    limit_verbs.write_blocks(admin, admin.keys(project), lambda *_: (own, copy))
    return {"names": len(names), "ips": len(ips), "cidrs": len(cidrs)}


# The block check of each script, alone, in a loop: before (SMISMEMBER on the set of exact
# entries) and after (ZSCORE for the name, ZREVRANGEBYLEX for the address; claim-21.lua).
LOOP_BEFORE = """local n = tonumber(ARGV[1]) for i = 1, n do
  local b = redis.call('SMISMEMBER', KEYS[1], 'name:dl' .. (i % 1000), 'ip:' .. ARGV[2])
  if b[1] == 1 or b[2] == 1 then return -1 end end return n"""
LOOP_AFTER = """local n = tonumber(ARGV[1]) local view, ip_key = 'a', ARGV[2] for i = 1, n do
  if redis.call('ZSCORE', KEYS[1], view .. 'n:dl' .. (i % 1000)) then return -1 end
  local near = redis.call('ZREVRANGEBYLEX', KEYS[1], '[' .. view .. ip_key .. '~',
                          '[' .. view .. string.sub(ip_key, 1, 1), 'LIMIT', 0, 1)[1]
  if near and string.sub(near, #view + #ip_key + 2) >= string.sub(ip_key, 2) then return -1 end
end return n"""
LOOP_N = 200_000


def lookup_ns(admin: AdminContext) -> dict:
    """ns per block check, each way, with no blocks and with the benchmark's blocks."""
    from tracker_core import blocks as blocks_mod

    before, after = admin.keys("before-blocks"), admin.keys("after-blocks")
    cases = {}
    for ip in ("10.1.2.7", "2001:db8:5::7"):
        cases[f"before, no blocks, {ip}"] = (LOOP_BEFORE, "{none}:blocked", ip)
        cases[f"before, 4,000 entries, {ip}"] = (LOOP_BEFORE, before.blocked, ip)
        cases[f"after, no blocks, {ip}"] = (LOOP_AFTER, "{none}:blocked_index", blocks_mod.ip_key(ip))
        cases[f"after, 4,000 entries + 1,000 ranges, {ip}"] = (
            LOOP_AFTER,
            after.blocked_index,
            blocks_mod.ip_key(ip),
        )
    result = {}
    for label, (source, key, arg) in cases.items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            assert admin.conn.eval(source, 1, key, LOOP_N, arg) == LOOP_N
            best = min(best, time.perf_counter() - start)
        result[label] = round(best / LOOP_N * 1e9)
    return result


def main() -> None:
    revision = sys.argv[1] if len(sys.argv) > 1 else BEFORE
    scripts.SCRIPTS["claim_before"] = old_script(revision)
    cases = {
        (b, blocked): f"{'before' if b else 'after'}-{'blocks' if blocked else 'plain'}"
        for b in (False, True)
        for blocked in (False, True)
    }
    usec: dict[str, list[float]] = {name: [] for name in cases.values()}
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), port=free_port()).start()
        try:
            admin = AdminContext.from_url(server.url)
            blocks = {}
            for (before, blocked), name in cases.items():
                project_verbs.create(admin, name)
                if blocked:
                    blocks[name] = add_blocks(admin, name, before)
            lookups = lookup_ns(admin)
            engine = Engine(server.url)
            for round_no in range(ROUNDS):
                for (before, _), name in cases.items():
                    usec[name].append(usec_per_claim(engine, admin, name, before, round_no))
        finally:
            server.stop()
    median = {name: round(sorted(v)[len(v) // 2], 2) for name, v in usec.items()}
    best = {name: round(min(v), 2) for name, v in usec.items()}
    result = {
        "what": "Redis usec per claim script call (INFO commandstats, evalsha), multi=1, "
        "one raw connection, 1,000 downloaders half on IPv4 and half on IPv6",
        "before": f"claim-21.lua at {revision} (SMISMEMBER on exact entries)",
        "after": "claim-21.lua now (ZSCORE + ZREVRANGEBYLEX on the block index)",
        "claims_per_round": CLAIMS_PER_ROUND,
        "rounds": ROUNDS,
        "blocks": blocks,
        "usec_per_claim": {name: [round(x, 2) for x in v] for name, v in usec.items()},
        "median_usec_per_claim": median,
        "best_usec_per_claim": best,
        "block_check_alone_ns": lookups,
        "note": "2 shared cores: rounds vary; the cases alternate within each round",
        "machine": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
