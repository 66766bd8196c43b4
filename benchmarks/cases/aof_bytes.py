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

Writes results/aof_bytes.json and .md (with the history of earlier runs).
"""

from __future__ import annotations

from harness import Bench
from harness.registry import case
from harness.results import provenance_line
from server_bench.redis_aof import wait_for_aof_written
from tracker_core.admin import project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items.engine import Engine

PROJECT = "aof"
WARM_UP = 2000  # claims before the measured ones: the day's first ones write more (uniques, hashes)


def client(i: int) -> tuple[str, str]:
    return f"warrior-{i % 500}", f"10.0.{i % 200}.1"


def aof_size(admin: AdminContext) -> int:
    """The AOF's size once Redis has written what it acknowledged: it counts bytes as it writes
    them, and with the disk busy it may hold back up to 2 s of writes (redis_aof.wait_for_aof_written)."""
    wait_for_aof_written(admin.conn)
    return int(admin.conn.info("persistence")["aof_current_size"])


def measure(bench: Bench, claims: int) -> dict:
    server = bench.redis()
    admin = AdminContext.from_url(server.url)
    project_verbs.create(admin, PROJECT)
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
            f"{provenance_line(result)} {f['claims']:,} claims "
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


@case("aof_bytes", report=markdown, history=carried_history)
def run(bench: Bench) -> dict:
    """AOF bytes Redis appends per claim and per done."""
    figures = measure(bench, bench.size("claims", 10_000, quick=300))
    headline = {k: figures[k] for k in ("bytes_per_claim", "bytes_per_done")}
    return {"what": __doc__.splitlines()[0], "figures": figures, "headline": headline}
