"""A warrior's claims, quiet and beside anonymous floods (issue 26): `--part anonymous`.

One `tracker serve` with its default workers over a fresh Redis holding LISTED listed projects, a
project whose leaderboard has DOWNLOADERS downloaders, and URL items with 4 KB names. Each phase
runs one warrior (wrk, one connection claiming one item at a time, as fast as it is answered) for
SECONDS, alone or beside eight anonymous connections looping on one GET:

- `/metrics` (every listed project), the front page and projects.json: rendered by the renderer,
  served from its files (tracker_api.public.public_cache);
- `stats.json?top=10000` of the big leaderboard: rendered likewise, per parameters;
- an item's status with a 4 KB name: answered by the worker itself (its cost follows the name,
  bounded by the URL limit, not the number of projects or items).

The figures (warrior p50 and p99, the flood's rate) go to results/anonymous_load.json and .md.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
import urllib.parse
from pathlib import Path

from harness import Bench
from harness.results import provenance_line
from server_bench.plan import PROJECT
from server_bench.servers import start_tracker
from server_bench.wrk import run_wrk
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import stop
from tracker_core.items.engine import Engine

LISTED = 300
DOWNLOADERS = 3000
BOARD = "board"
FLOOD_CONNECTIONS = 8
# A 4,096-character name (the longest an item may have), as URL items are.
LONG_NAME = ("https://example.org/archive/" + "a%20b/" * 680)[: 4096 - 6] + "?q=1#x"


def populate(redis_url: str, warrior_items: int, listed: int, downloaders: int) -> None:
    admin = AdminContext.from_url(redis_url)
    engine = Engine(redis_url)
    for n in range(listed):
        project_verbs.create(admin, f"listed-{n:04d}", {"title": f"Listed project {n}"})
    project_verbs.create(admin, PROJECT)
    item_verbs.add(
        admin, PROJECT, (f"https://example.org/item/{n}?page=1" for n in range(warrior_items)), batch=10_000
    )
    item_verbs.add(admin, PROJECT, [LONG_NAME])
    project_verbs.create(admin, BOARD)
    item_verbs.add(admin, BOARD, (f"https://example.org/board/{n}" for n in range(downloaders)), batch=10_000)
    for n in range(downloaders):  # one item done by each: a leaderboard of DOWNLOADERS rows
        downloader = f"downloader-{n:05d}"
        _, names = engine.claim(BOARD, downloader, "127.0.0.1", 1)
        engine.done(BOARD, downloader, "1", names, ["data", 1000 * (n + 1)], "")


def phases(base: str, listed: int, downloaders: int) -> list[tuple[str, str | None]]:
    status = f"{base}/{PROJECT}/items/{urllib.parse.quote(LONG_NAME, safe='')}.json"
    return [
        ("quiet", None),
        (f"/metrics, {listed} listed projects", f"{base}/metrics"),
        ("front page", f"{base}/"),
        ("projects.json", f"{base}/projects.json"),
        (f"stats.json?top=10000, {downloaders} downloaders", f"{base}/{BOARD}/stats.json?top=10000"),
        ("item status, 4 KB name", status),
    ]


def run_phase(base: str, flood_url: str | None, seconds: int, lead_s: float) -> dict:
    """The warrior alone, or with the flood started LEAD_S before it and ending after it."""
    flood = None
    if flood_url is not None:
        duration_s = math.ceil(seconds + 2 * lead_s)
        command = ["wrk", "-t2", f"-c{FLOOD_CONNECTIONS}", f"-d{duration_s}s", "--timeout", "5s"]
        command += ["-s", str(Path(__file__).resolve().parent.parent / "wrk" / "get.lua"), flood_url]
        flood = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(lead_s)
    warrior = run_wrk(f"{base}/{PROJECT}/request", "request.lua", 1, seconds, False)
    row = {"warrior": warrior}
    if flood is not None:
        out, err = flood.communicate(timeout=seconds + 60)
        lines = [line for line in out.splitlines() if line.startswith("BENCH_JSON ")]
        if not lines:
            raise RuntimeError(f"flood wrk failed: {err.strip() or out}")
        figures = json.loads(lines[-1][len("BENCH_JSON ") :])
        row["flood"] = {
            "requests": figures["requests"],
            "requests_per_s": round(figures["requests"] / (figures["duration_us"] / 1e6), 1),
            "p50_ms": round(figures["latency_us"]["p50"] / 1000, 3),
            "non_2xx": figures["errors"]["status"],  # 429s past a worker's byte budget, mostly
            "mb_per_s": round(figures["bytes"] / (figures["duration_us"] / 1e6) / 1e6, 1),
        }
    return row


def run_anonymous(bench: Bench) -> dict:
    """A warrior's claims, quiet and beside anonymous floods of /metrics, stats and item status."""
    seconds = bench.size("seconds", 10, quick=1)
    listed = bench.size("listed", LISTED, quick=20)
    downloaders = bench.size("downloaders", DOWNLOADERS, quick=100)
    lead_s = bench.size("flood_lead_s", 1.0, quick=0.3)
    started = time.monotonic()
    scratch = bench.tmp
    redis_server = bench.redis()
    # A warrior claims some 2,000 items a second: enough for every phase.
    populate(redis_server.url, 2500 * seconds * 6 + 10_000, listed, downloaders)
    process, port = start_tracker(redis_server.url, scratch / "server.log")
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        run_wrk(f"{base}/{PROJECT}/request", "request.lua", 1, 1, False)  # warm-up, not kept
        for name, url in phases(base, listed, downloaders):
            rows.append({"phase": name, **run_phase(base, url, seconds, lead_s)})
    finally:
        stop(process)
    return {
        "listed_projects": listed,
        "downloaders": downloaders,
        "flood_connections": FLOOD_CONNECTIONS,
        "seconds_per_phase": seconds,
        "phases": rows,
        "seconds_total": round(time.monotonic() - started, 1),
    }


def report(results: dict) -> str:
    lines = [
        "# A warrior beside anonymous floods",
        "",
        f"{provenance_line(results)} {results['machine']['cores']} CPUs. One warrior (wrk, one "
        f"connection, `/request` multi=1) for {results['seconds_per_phase']} s per phase, alone or beside "
        f"{results['flood_connections']} anonymous connections looping on one GET. "
        'docs/operations.md, "Anonymous aggregates", says what the renderer does.',
        "",
        "| flood | warrior claims/s | warrior p50 ms | warrior p99 ms | flood req/s | of them not 2xx | flood p50 ms | flood MB/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["phases"]:
        w, f = row["warrior"], row.get("flood")
        flood = "- | - | - | -"
        if f:
            share = f["non_2xx"] / max(1, f["requests"])
            flood = f"{f['requests_per_s']:,.0f} | {share:.0%} | {f['p50_ms']:.2f} | {f['mb_per_s']:,.1f}"
        lines.append(
            f"| {row['phase']} | {w['requests_per_s']:,.0f} | {w['latency_ms']['p50']:.2f} | "
            f"{w['latency_ms']['p99']:.2f} | {flood} |"
        )
    return "\n".join(lines) + "\n"
