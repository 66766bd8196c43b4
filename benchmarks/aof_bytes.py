"""AOF bytes Redis appends per claim and per done: what spaces its rewrites out.

Redis rewrites its AOF (a fork, then a child that takes a core for a while) each time the file
grows past its threshold (`auto-aof-rewrite-min-size` 64 MB, or the size after the last rewrite
times `auto-aof-rewrite-percentage`): at a given claim rate, the bytes a claim appends set how
often that happens (capacity.md counts the forks of each constant-rate run). A script's writes
reach the AOF as the commands it ran (effects replication, wrapped in MULTI/EXEC), so every
write a claim or a done makes costs its bytes there.

Claims of one item each through the engine (as `/request` makes them: 500 downloaders, 200
addresses, URL item names), then a done of each (one domain); the growth of `aof_current_size`
over each phase, after a warm-up that has made the day's uniques, the minute hash and the
downloaders' counters.

    .venv/bin/python benchmarks/aof_bytes.py [--claims 10000] [--out DIR]

Writes benchmarks/results/aof_bytes.json and .md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from server_bench.redis_aof import wait_for_aof_written
from server_bench.results_file import run_header, write_with_history
from tracker_core.admin import projects
from tracker_core.admin.context import AdminContext
from tracker_core.embedded import EmbeddedRedis
from tracker_core.engine import Engine
from tracker_core.processes import free_port

RESULTS = Path(__file__).with_name("results")
PROJECT = "aof"
WARM_UP = 2000  # claims before the measured ones: the day's first ones write more (uniques, hashes)


def client(i: int) -> tuple[str, str]:
    return f"warrior-{i % 500}", f"10.0.{i % 200}.1"


def aof_size(admin: AdminContext) -> int:
    """The AOF's size once Redis has written what it acknowledged: it counts bytes as it writes
    them, and with the disk busy it may hold back up to 2 s of writes (redis_aof.wait_for_aof_written)."""
    wait_for_aof_written(admin.conn)
    return int(admin.conn.info("persistence")["aof_current_size"])


def measure(claims: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="aof-bytes-") as scratch:
        server = EmbeddedRedis(Path(scratch) / "redis", port=free_port()).start()
        try:
            admin = AdminContext.from_url(server.url)
            projects.create(admin, PROJECT)
            names = [f"https://example.com/item/{i}?q=%20x&r=/a b#frag" for i in range(WARM_UP + claims)]
            admin.conn.sadd(admin.keys(PROJECT).todo, *names)
            engine = Engine(server.url)
            for i in range(WARM_UP):
                assert engine.claim(PROJECT, *client(i), 1)[0] == 200
            before = aof_size(admin)
            claimed = []
            for i in range(claims):
                status, items = engine.claim(PROJECT, *client(i), 1)
                assert status == 200 and len(items) == 1
                claimed.append((client(i)[0], items[0]))
            after_claims = aof_size(admin)
            for downloader, item in claimed:
                assert engine.done(PROJECT, downloader, "1", [item], ["example.com", 1000], "{}").new == 1
            after_dones = aof_size(admin)
        finally:
            server.stop()
    return {
        "claims": claims,
        "bytes_per_claim": round((after_claims - before) / claims, 1),
        "bytes_per_done": round((after_dones - after_claims) / claims, 1),
    }


def markdown(result: dict) -> str:
    f = result["figures"]
    rows = [
        f"| {h['date']} | {h['commit']} | {h['bytes_per_claim']} | {h['bytes_per_done']} |"
        for h in result["history"]
    ]
    return "\n".join(
        [
            "# AOF bytes per claim and per done",
            "",
            f"`{result['command']}` on {result['date']} (commit {result['commit']}): {f['claims']:,} claims "
            "of one item through the engine, then a done of each (one domain), after a warm-up; the "
            "growth of Redis's `aof_current_size` over each phase. A rewrite (a fork) comes each "
            "time the AOF grows past its threshold, so at a given rate these bytes set how often.",
            "",
            f"- per claim: **{f['bytes_per_claim']} bytes**",
            f"- per done: **{f['bytes_per_done']} bytes**",
            "",
            "## History",
            "",
            "| run | commit | bytes per claim | bytes per done |",
            "| --- | --- | ---: | ---: |",
            *rows,
            f"| {result['date']} (this run) | {result['commit']} | {f['bytes_per_claim']} | {f['bytes_per_done']} |",
            "",
        ]
    )


def carried_history(previous: dict | None) -> list[dict]:
    """The runs before, each its date, commit and two figures."""
    if previous is None:
        return []
    figures = {k: previous["figures"][k] for k in ("bytes_per_claim", "bytes_per_done")}
    return previous.get("history", []) + [{"date": previous["date"], "commit": previous["commit"]} | figures]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    result = {
        "what": __doc__.splitlines()[0],
        **run_header("benchmarks/aof_bytes.py", argv, load),
        "figures": measure(args.claims),
    }
    write_with_history(result, args.out, "aof_bytes", carried_history, markdown)
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
