"""What the done's counters would cost Redis if they were folded from the done log afterwards.

A done of one claimed item runs about 258,000 instructions in Redis, of which the item's move and
its done-log entry are about 95,000 (`claim_cost_instructions.py --done-floors`): the rest is the
counters (stats and minute hashes, the leaderboard, domain bytes, the version) and the type
probes that make them safe. The log entry holds everything those counters are made of, so a
design could leave the done script only the move and the entry, and have a second script fold
the log into the counters in batches (a cursor moved in the same script, so each entry counts
once). This measures that second script, FOLD below, in instructions per entry under callgrind:
a log of N entries like the done's (one item, one domain, the RTT added) from D downloaders,
folded in one call, minus the same call over 0 entries.

FOLD is a measuring prototype, never used: it aggregates what the done script counts today (items
and RTT buckets, bytes, the RTT sum, per downloader items, bytes and version, per domain bytes),
in the stats hash and one minute's hash, and moves the cursor. A real fold would add the 2^53
room checks (one HMGET a batch), the minute of each entry (a batch spanning minutes writes
each), a repeated version not written, and the log archive and the done's safety cut waiting
for the cursor.

    .venv/bin/python benchmarks/done_fold_cost.py [--entries 2000] [--downloaders 1 100 2000]

Writes benchmarks/results/done_fold_cost.json and .md.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import redis
from server_bench.results_file import run_header, write_results

from callgrind_redis import CALL_TIMEOUT_S, count_instructions
from tracker_core.scripts import constants

RESULTS = Path(__file__).with_name("results")
ITEM = "https://example.com/i/{n}?q=%20x#frag"

# KEYS: 1 log, 2 cursor (string), 3 stats, 4 minute, 5 downloader_count, 6 downloader_bytes,
# 7 domain_bytes, 8 downloader_version. ARGV: 1 how many entries at most. Returns the entries folded.
FOLD = """local BOUNDS = {BOUNDS_S}
local format = string.format
local after = redis.call('GET', KEYS[2]) or '0-0'
local entries = redis.call('XRANGE', KEYS[1], '(' .. after, '+', 'COUNT', ARGV[1])
if not entries or #entries == 0 then return 0 end   -- COUNT 0 answers nil
local items, bytes, rtt_sum, hist = 0, 0, 0, {}
local dl_items, dl_bytes, dl_version, domain = {}, {}, {}, {}
for i = 1, #entries do
  local f = entries[i][2]
  -- downloader, ip, items, bytes, domains, version, id, at, rtt: the done's field order
  local dl, names, b, domains, rtt = f[2], f[6], tonumber(f[8]), f[10], tonumber(f[18])
  local n = 1
  if string.find(names, '\\0', 1, true) then n = select(2, string.gsub(names, '%z', '')) + 1 end
  items = items + n
  bytes = bytes + b
  dl_items[dl] = (dl_items[dl] or 0) + n
  dl_bytes[dl] = (dl_bytes[dl] or 0) + b
  dl_version[dl] = f[12]
  for name, share in string.gmatch(domains, '([^%z]*)%z([^%z]*)') do
    domain[name] = (domain[name] or 0) + tonumber(share)
  end
  if rtt then
    rtt_sum = rtt_sum + rtt
    local bucket = 'inf'
    for _, bound in ipairs(BOUNDS) do
      if rtt <= bound * 1000 then bucket = bound break end
    end
    hist[bucket] = (hist[bucket] or 0) + 1
  end
end
local function bump(field, n)
  if n == 0 then return end
  local by = format('%d', n)
  redis.call('HINCRBY', KEYS[3], field, by)
  redis.call('HINCRBY', KEYS[4], field, by)
end
bump('items_done', items)
bump('bytes_done', bytes)
bump('rtt_sum_ms', rtt_sum)
for bucket, n in pairs(hist) do bump('rtt_le_' .. bucket, n) end
for dl, n in pairs(dl_items) do
  redis.call('HINCRBY', KEYS[5], dl, format('%d', n))
  redis.call('ZINCRBY', KEYS[6], format('%d', dl_bytes[dl]), dl)
  redis.call('HSET', KEYS[8], dl, dl_version[dl])
end
for name, b in pairs(domain) do redis.call('HINCRBY', KEYS[7], name, format('%d', b)) end
redis.call('SET', KEYS[2], entries[#entries][1])
return #entries""".replace("BOUNDS_S", ", ".join(str(b) for b in constants.RTT_BOUNDS_S))

KEYS = (
    "{p}:log",
    "{p}:log_folded",
    "{p}:stats",
    "{p}:minute:0",
    "{p}:downloader_count",
    "{p}:downloader_bytes",
    "{p}:domain_bytes",
    "{p}:downloader_version",
)


def fill_log(conn: redis.Redis, entries: int, downloaders: int) -> None:
    """ENTRIES log entries as the done writes them (one item, one domain) plus the RTT."""
    pipe = conn.pipeline(transaction=False)
    for n in range(entries):
        pipe.xadd(
            KEYS[0],
            {
                "downloader": f"dl{n % downloaders}",
                "ip": "10.0.0.7",
                "items": ITEM.format(n=n),
                "bytes": "5000",
                "domains": "example.com\0" + "5000",
                "version": "1.2",
                "id": "{}",
                "at": "1700000000000",
                "rtt": str(1000 + 37 * n % 900_000),
            },
        )
    pipe.execute()


def instructions(entries: int, downloaders: int, fold: bool) -> int:
    """Instructions Redis ran in EVAL calls: FOLD over a log of ENTRIES (or over none, FOLD false)."""

    def work(url: str) -> None:
        conn = redis.Redis.from_url(url, socket_timeout=CALL_TIMEOUT_S)
        fill_log(conn, entries, downloaders)
        if fold:
            assert conn.eval(FOLD, len(KEYS), *KEYS, entries) == entries
            check(conn, entries, downloaders)  # its second FOLD, over nothing, is the base's second
        else:
            for _ in range(2):
                assert conn.eval(FOLD, len(KEYS), *KEYS, 0) == 0

    return count_instructions("evalCommand", work)


def read_instructions(entries: int) -> int:
    """Instructions Redis runs to answer one client XRANGE of ENTRIES log entries (a fold done
    outside Redis, by the maintainer, would read them so: the socket write not counted)."""

    def work(url: str) -> None:
        conn = redis.Redis.from_url(url, socket_timeout=CALL_TIMEOUT_S)
        fill_log(conn, entries, 1)
        assert len(conn.xrange(KEYS[0], count=entries)) == entries

    return count_instructions("xrangeCommand", work)


def check(conn: redis.Redis, entries: int, downloaders: int) -> None:
    """The fold counted what the done would have: every entry once."""
    stats = {k.decode(): int(v) for k, v in conn.hgetall(KEYS[2]).items()}
    assert stats["items_done"] == entries and stats["bytes_done"] == 5000 * entries, stats
    assert sum(v for k, v in stats.items() if k.startswith("rtt_le_")) == entries
    assert conn.hlen(KEYS[4]) == downloaders and int(conn.hget(KEYS[6], "example.com")) == 5000 * entries
    assert conn.eval(FOLD, len(KEYS), *KEYS, entries) == 0  # the cursor moved: nothing twice


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--downloaders", type=int, nargs="*", default=[1, 100, 2000])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for downloaders in args.downloaders:
        downloaders = min(downloaders, args.entries)
        total = instructions(args.entries, downloaders, True)
        base = instructions(args.entries, downloaders, False)
        per_entry = round((total - base) / args.entries)
        rows.append(
            {"entries": args.entries, "downloaders": downloaders, "instructions_per_entry": per_entry}
        )
        print(
            f"{args.entries} entries from {downloaders} downloaders: {per_entry:,} instructions an entry",
            flush=True,
        )
    read = round(read_instructions(args.entries) / args.entries)
    print(f"a client's XRANGE of {args.entries} entries: {read:,} instructions an entry", flush=True)
    results = run_header("benchmarks/done_fold_cost.py", argv, os.getloadavg()) | {
        "folds": rows,
        "client_xrange_instructions_per_entry": read,
    }
    write_results(args.out, "done_fold_cost", results, report(results))
    return results


def report(results: dict) -> str:
    lines = [
        "# The done's counters folded from its log: Redis instructions per entry",
        "",
        f"Made by `{results['command']}` ({results['date']}, commit {results['commit']}). FOLD (in the "
        "script) reads a batch of done-log entries and adds them to the counters the done script bumps "
        "today, in one call; instructions under callgrind, that call minus the same over no entries. A "
        "prototype to size a design, never used.",
        "",
        "| entries a batch | downloaders among them | instructions an entry |",
        "| --- | --- | --- |",
    ]
    for row in results["folds"]:
        lines.append(f"| {row['entries']:,} | {row['downloaders']:,} | {row['instructions_per_entry']:,} |")
    lines += [
        "",
        "Read by a client instead (the maintainer folding them in Python, then writing the sums in one "
        f"script): Redis runs {results['client_xrange_instructions_per_entry']:,} instructions an entry "
        "to answer the XRANGE (the socket write not counted), where FOLD's own XRANGE also turns each "
        "entry's 18 strings into Lua values.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
