"""Where the claim script's Redis time goes: the real script against copies with one part cut out.

Runs claim (multi=1, every claim served from `todo`, 1,000 downloaders half on IPv4 and half on
IPv6, no blocks, limits or caps set: the common case) over one raw connection to a private
redis-server, and reads Redis's own accounting per variant: EVALSHA's usec per call in INFO
commandstats (the time inside the script) and used_cpu_user+sys per call from INFO cpu (the
whole call: reading 22 keys and 5 arguments off the socket included). The variants alternate
within each round, so a shared, noisy machine hits them alike; the figures are medians.

A part's cost is the full script's time minus the variant's. The variants only measure: a
script with a part cut out breaks a rule (that is the point), none is ever used.

    .venv/bin/python benchmarks/claim_cost_breakdown.py [--rounds N] [--claims N] [--label TEXT]

Writes benchmarks/results/claim_cost.json and claim_cost.md (the label, e.g. "before" or
"after", keys the run in the JSON, so earlier runs stay beside the new one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from server_bench.results_file import git_commit

from tracker_core import scripts
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.scripts import loading

DOWNLOADERS = 1000
RESULTS = Path(__file__).with_name("results")
ROOT = Path(__file__).resolve().parent.parent


def client(n: int) -> tuple[str, str]:
    d = n % DOWNLOADERS
    ip = f"10.{d // 250}.{d % 250}.7" if d % 2 else f"2001:db8:{d:x}::7"
    return f"dl{d}", ip


def _cut(source: str, cuts: list[tuple[str, str]]) -> str:
    for old, new in cuts:
        assert old in source, f"variant pattern not in the script: {old!r}"
        source = source.replace(old, new)
    return source


# name -> (what is cut out, [(text, replacement)]) on the inlined claim source. Each text must
# be in the script (asserted), so a change to the script that a variant no longer fits fails
# loudly rather than measuring nothing.
VARIANTS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "counters": (
        "every counter (stats and minute hashes)",
        [("  if n == 0 then return end\n", "  do return end\n")],
    ),
    "minute_counters": (
        "the minute hash's half of every counter",
        [("  if minute_key then\n", "  if false then\n")],
    ),
    "uniques": ("the two PFADDs", [("if redis.call('PFADD'", "if false and redis.call('PFADD'")]),
    "blocks": (
        "the block checks (ZSCORE, ZREVRANGEBYLEX)",
        [
            (
                "if redis.call('ZSCORE', blocked_index_key",
                "if false and redis.call('ZSCORE', blocked_index_key",
            ),
            ("if ip_key ~= '' then", "if false then"),
        ],
    ),
    "limits": (
        "the due-limits read (take_limited's ZRANGEBYSCORE; an EXISTS guard before it stays)",
        [
            (
                "  take_limited(limited_key, limits_ready_key, limit_tat_key, limits_key, upto - (#reply - 2), now,\n"
                "               reply, fresh)\n",
                "",
            )
        ],
    ),
    "own_queue": (
        "the SPOP of the downloader's own queue",
        [("for q = FIRST_QUEUE, LAST_QUEUE do", "for q = FIRST_QUEUE + 1, LAST_QUEUE do")],
    ),
}


# The floor: the same call (22 keys, 5 arguments) doing only what any claim must, read the
# settings and pop an item.
FLOOR = """local s = redis.call('HMGET', KEYS[1], 'settings_age')
return {200, s[1], redis.call('SPOP', KEYS[4], 1)[1]}"""


# The done's floors: the same call (20 keys; one item, one domain) doing only what a done of one
# claimed item must whatever becomes of the counters. "moves": read the settings, the claim and
# its holder's count, move the item from out to done, take the claim and the holder's count
# away. "moves_and_log": also its entry in the done log, with every field the real one writes
# and the item's RTT, so that counters could be derived from the log after the call. What any
# done script costs at the least, in these two shapes; a measurement, never used.
DONE_MOVES = """local s = redis.call('HMGET', KEYS[1], 'settings_age', 'done_mode', 'log_maxlen',
                      'accept_queued_dones', 'max_bytes_per_item')
local item = ARGV[#ARGV]
if not redis.call('ZSCORE', KEYS[2], item) then return {200, s[1], 0, 0, 1, 0, 0} end
local claim = redis.call('HGET', KEYS[3], item)
local claimant, claimed_at = string.match(claim, '^([^\\t]*)\\t[^\\t]*\\t[^\\t]*\\t(%d+)')
local held = tonumber(redis.call('HGET', KEYS[5], claimant)) or 0
redis.call('SADD', KEYS[4], item)
redis.call('ZREM', KEYS[2], item)
redis.call('HDEL', KEYS[3], item)
if held <= 1 then redis.call('HDEL', KEYS[5], claimant) else redis.call('HINCRBY', KEYS[5], claimant, '-1') end
--LOG--
return {200, s[1], 1, 0, 0, 0, 0}"""
DONE_LOG = """redis.call('XADD', KEYS[6], '*', 'downloader', ARGV[2], 'ip', ARGV[5], 'items', item,
           'bytes', ARGV[8], 'domains', ARGV[7] .. '\\0' .. ARGV[8], 'version', ARGV[3], 'id', ARGV[4],
           'at', ARGV[1], 'rtt', string.format('%d', tonumber(ARGV[1]) - tonumber(claimed_at)))"""
# name -> (what it runs, its source)
DONE_FLOORS = {
    "moves": (
        "done floor: only the item's move (settings, claim and holder read; out to done; claim and count away)",
        DONE_MOVES.replace("--LOG--\n", ""),
    ),
    "moves_and_log": (
        "done floor: the move and its done-log entry (every field, the RTT too), no counter",
        DONE_MOVES.replace("--LOG--", DONE_LOG),
    ),
}


def _git_show(revision: str, lua_path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{revision}:src/tracker_core/lua/{lua_path}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def script_at(revision: str, name: str = "claim") -> scripts.Script:
    """Script NAME as it was at REVISION, with its includes as they were (constants: today's)."""
    path = next(p for p in scripts.LUA_DIR.glob(f"{name}-*.lua"))
    text = _git_show(revision, path.name)
    text = loading._INCLUDE_RE.sub(lambda m: _git_show(revision, f"includes/{m[1]}.lua"), text)
    source = loading.inline(text)
    real = scripts.SCRIPTS[name]
    return scripts.Script(name, real.num_keys, source, hashlib.sha1(source.encode()).hexdigest())


def variant(real: scripts.Script, name: str) -> scripts.Script:
    if name == "full":
        return real
    if name.startswith("at "):
        return script_at(name[3:], real.name)
    if name in DONE_FLOORS:
        source = DONE_FLOORS[name][1]
    elif name == "floor":
        source = FLOOR
    else:
        source = _cut(real.source, VARIANTS[name][1])
    return scripts.Script(real.name, real.num_keys, source, hashlib.sha1(source.encode()).hexdigest())


def _cpu_s(conn) -> float:
    info = conn.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def one_round(
    engine: Engine, admin: AdminContext, claims: int, round_no: int, dones: bool
) -> tuple[float, float]:
    """Claim CLAIMS items (and with DONES report each done, one a call); (commandstats usec per
    call, Redis CPU usec per call) of the claims, or of the dones."""
    k = engine.keys("bench")
    names = [f"https://example.com/r{round_no}/{n}?q=%20x#f" for n in range(claims)]
    for i in range(0, claims, 1000):
        admin.conn.sadd(k.todo, *names[i : i + 1000])
    engine.settings("bench")  # as the warrior does before each claim: what the engine caches
    if dones:
        given = [(engine.claim("bench", *client(n), 1)[1][0], n) for n in range(claims)]
    # Loaded before the count: a NOSCRIPT is two EVALSHAs (the engine's packed one, then
    # the binding's) and an EVAL.
    admin.conn.script_load(scripts.SCRIPTS["done" if dones else "claim"].source)
    admin.conn.config_resetstat()
    cpu0 = _cpu_s(admin.conn)
    if dones:
        for item, n in given:
            reply = engine.done(
                "bench", client(n)[0], "1.2", [item], ["example.com", 123_456], "{}", client(n)[1]
            )
            assert reply.new == 1, reply
    else:
        for n in range(claims):
            status = engine.claim("bench", *client(n), 1)[0]
            assert status == 200, status
    cpu1 = _cpu_s(admin.conn)
    stats = admin.conn.info("commandstats")
    evalsha = stats["cmdstat_evalsha"]
    calls = int(evalsha["calls"])
    assert calls == claims, calls
    # The round's state goes, so every round claims against the same sizes.
    admin.conn.delete(k.out, k.claims, k.reclaim_at, k.downloader_claims)
    # INFO cpu covers the reads of INFO itself too: a few calls against thousands of claims.
    return int(evalsha["usec"]) / calls, (cpu1 - cpu0) * 1e6 / calls


# The script body run N times in one call inside Redis (no network, no EVALSHA set-up between
# runs, no scheduling gaps between calls): the steadiest figure on a shared machine. The claim
# loop claims N items (one a run, the same client); the done loop reports, one a run, the N
# oldest claims in `out`, the item name put in the last ARGV before each run.
LOOP = """local function body()
%s
end
local n = tonumber(ARGV[#ARGV])
ARGV[#ARGV] = nil
local items = %s
for i = 1, n do
  if items then ARGV[#ARGV] = items[i] end
  local reply = body()
  if reply[1] ~= 200 or %s then return {-99, i, reply[1], reply[3]} end
end
return n"""


def loop_usec(
    engine: Engine, admin: AdminContext, chosen: scripts.Script, n: int, dones: bool, round_no: int
) -> float:
    """usec per run of CHOSEN's body inside one Redis call of N runs."""
    k = engine.keys("bench")
    names = [f"https://example.com/loop{round_no}/{i}?q=%20x#f" for i in range(n)]
    for i in range(0, n, 1000):
        admin.conn.sadd(k.todo, *names[i : i + 1000])
    now_ms = engine._now_ms()
    if dones:
        for i in range(n):
            assert engine.claim("bench", *client(i), 1)[0] == 200
        keys, argv = loop_call(engine, k, now_ms, dones=True)
        source = LOOP % (chosen.source, f"redis.call('ZRANGE', KEYS[2], 0, {n - 1})", "reply[3] ~= 1")
    else:
        keys, argv = loop_call(engine, k, now_ms, dones=False)
        source = LOOP % (chosen.source, "nil", "false")
    start = time.perf_counter()
    reply = admin.conn.eval(source, len(keys), *keys, *argv, n)  # the loop's count after ARGV
    elapsed = time.perf_counter() - start
    assert reply == n, reply
    admin.conn.delete(k.out, k.claims, k.reclaim_at, k.downloader_claims, k.done, k.log)
    return elapsed * 1e6 / n


def loop_call(engine: Engine, k, now_ms: int, dones: bool) -> tuple[tuple, tuple]:
    """(KEYS, ARGV) of the done (DONES) or claim the LOOP repeats: dl1 from 10.0.0.1, a done of
    one item "x" with its bytes; the claim's client counted in the uniques, as a warm one is."""
    if dones:
        call = {"now_ms": now_ms + 5000, "downloader": "dl1", "version": "1.2", "item_id": "{}"}
        call |= {"ip": "10.0.0.1", "domain_bytes": ["example.com", 123_456], "items": ["x"]}
        return scripts.done.keys(k, **call), scripts.done.argv(k, **call)
    created = engine.settings("bench").values["created_ms"]
    call = {"now_ms": now_ms, "downloader": "dl1", "ip": "10.0.0.1", "wanted": 1}
    call |= {"counted_under": created, "downloader_counted": True, "ip_counted": True}
    return scripts.claim.keys(k, **call), scripts.claim.argv(k, **call)


def median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--claims", type=int, default=4000, help="claims per variant per round")
    parser.add_argument("--label", default="now")
    parser.add_argument("--loop", type=int, default=3000, help="runs of the script body in one Redis call")
    parser.add_argument("--only", nargs="*", help="variants to run (default: all)")
    parser.add_argument("--before", help="also run the script of this git revision ('at REV')")
    parser.add_argument("--done", action="store_true", help="time done-20.lua (full and --before only)")
    args = parser.parse_args()
    script = "done" if args.done else "claim"
    names = (["full"] if args.done else ["full", *VARIANTS, "floor"]) if not args.only else args.only
    if args.before:
        names.append(f"at {args.before}")
    real = scripts.SCRIPTS[script]
    chosen = {name: variant(real, name) for name in names}
    own: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    loop: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        # AOF off, as benchmarks/cpu_per_request.py runs it (AOF makes every write dearer).
        server = EmbeddedRedis(Path(tmp), port=free_port(), extra=["--appendonly", "no"]).start()
        try:
            admin = AdminContext.from_url(server.url)
            project_verbs.create(admin, "bench")
            # One engine per variant: the engine keeps each script call packed with the script's
            # SHA (tracker_core.scripts.packed), so an engine shared across variants would run the
            # variant it packed first.
            engines = {name: Engine(server.url) for name in chosen}
            for round_no in range(args.rounds):
                for name, chosen_script in chosen.items():
                    scripts.SCRIPTS[script] = chosen_script
                    a, b = one_round(engines[name], admin, args.claims, round_no, args.done)
                    own[name].append(a)
                    cpu[name].append(b)
                    if name != "floor":
                        loop[name].append(
                            loop_usec(engines[name], admin, chosen_script, args.loop, args.done, round_no)
                        )
            scripts.SCRIPTS[script] = real
        finally:
            server.stop()
    full_own, full_cpu = median(own["full"]), median(cpu["full"])
    run = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": git_commit(short=False),
        "script": script,
        "rounds": args.rounds,
        "claims_per_round": args.claims,
        "median_usec_own": {n: round(median(v), 2) for n, v in own.items()},
        "median_usec_cpu": {n: round(median(v), 2) for n, v in cpu.items()},
        "best_usec_own": {n: round(min(v), 2) for n, v in own.items()},
        "best_usec_cpu": {n: round(min(v), 2) for n, v in cpu.items()},
        "part_cost_usec_own": {n: round(full_own - median(v), 2) for n, v in own.items() if n != "full"},
        "part_cost_usec_cpu": {n: round(full_cpu - median(v), 2) for n, v in cpu.items() if n != "full"},
        "usec_own_rounds": {n: [round(x, 2) for x in v] for n, v in own.items()},
        "loop_runs": args.loop,
        "best_usec_loop": {n: round(min(v), 2) for n, v in loop.items() if v},
        "median_usec_loop": {n: round(median(v), 2) for n, v in loop.items() if v},
        "part_cost_usec_loop": {
            n: round(min(loop["full"]) - min(v), 2) for n, v in loop.items() if v and n != "full"
        },
        "machine": platform.platform(),
    }
    path = RESULTS / "claim_cost.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data["what"] = (
        "Redis usec per claim call (multi=1, served from todo, no blocks/limits/caps) or done call "
        "(one item, one domain): "
        "own = INFO commandstats evalsha usec_per_call, cpu = INFO cpu used_cpu_user+sys per call"
    )
    data.setdefault("runs", {})[args.label] = run
    path.write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS / "claim_cost.md").write_text(markdown(data))
    print(json.dumps(run, indent=2))


def markdown(data: dict) -> str:
    lines = [
        "# Claim and done scripts: where their Redis time goes",
        "",
        "Made by `.venv/bin/python benchmarks/claim_cost_breakdown.py`. " + data["what"] + "; loop = "
        "the script body run N times inside one EVAL (no network, no EVALSHA set-up).",
        "A part's cost is the full script's figure minus that of a copy with the part cut out. On 2 "
        "cores shared with other engineers' runs the medians move by 2x between minutes (negative "
        "part costs are that noise); the best of the rounds is steadier, and the instruction counts "
        "of claim_cost_instructions.md are the figure the load cannot move.",
        "",
    ]
    for label, r in data["runs"].items():
        lines += [
            f"## {label}: {r.get('script', 'claim')} ({r['when']}, commit {r['commit'][:10]}, "
            f"{r['rounds']} rounds x {r['claims_per_round']} calls)",
            "",
            "| variant | own us/call median | best | Redis CPU us/call median | best | loop us/run best |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for n in r["median_usec_own"]:
            what = (
                "the real script"
                if n == "full"
                else "floor: HMGET settings + SPOP todo only"
                if n == "floor"
                else f"without {VARIANTS[n][0]}"
                if n in VARIANTS
                else DONE_FLOORS[n][0]
                if n in DONE_FLOORS
                else f"the script {n}"
            )
            lines.append(
                f"| {what} | {r['median_usec_own'][n]} | {r['best_usec_own'][n]} | "
                f"{r['median_usec_cpu'][n]} | {r['best_usec_cpu'][n]} | "
                f"{r.get('best_usec_loop', {}).get(n, '')} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
