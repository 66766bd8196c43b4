"""What `tracker backup` and `tracker restore` cost (docs/runbook.md, "Backups and restore").

One project of --items URL-like names, most of them offloaded to segment files by a maintainer
pass (offload_high a tenth of the items), is backed up by the real command into a new
directory, then restored by the real command into a second, empty Redis and segments
directory. Timed: each command's wall time (its start-up included), the time the backup held
the offload leases (refills paused: `leases_held_s` in its answer) and the backup's size. The
restore's census must equal the backup's, or the case fails.

    PYTHONPATH=benchmarks python -m harness --only backup                      # 1,000,000 items
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from harness import Bench, case
from harness.results import provenance_line
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.maintainer import maintenance

PROJECT = "backedup"


def tracker(url: str, *args: str) -> tuple[float, dict]:
    """(wall seconds, JSON answer) of `tracker --redis-url URL ARGS... --json`."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tracker_api.cli", "--redis-url", url, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"tracker {args[0]} failed: {done.stderr.strip()[-500:]}")
    return took, json.loads(done.stdout)


def measure(bench: Bench, items: int) -> dict:
    source = bench.redis("source")
    admin = AdminContext.from_url(source.url)
    high = max(items // 10, 2)
    settings = {"offload_high": str(high), "offload_low": str(high // 2)}
    settings["offload_segment_items"] = str(min(50_000, high // 2))
    project_verbs.create(admin, PROJECT, settings)
    started = time.monotonic()
    for start in range(0, items, 100_000):
        names = [f"https://example.com/b/{i}?q=%20x#f" for i in range(start, min(items, start + 100_000))]
        item_verbs.add(admin, PROJECT, names)
    segments = bench.tmp / "segments"
    maintenance.maintain_project(admin.conn, PROJECT, segments)  # takes and gives up its lease
    loaded_s = time.monotonic() - started
    into = bench.tmp / "backup"
    backup_s, taken = tracker(source.url, "backup", str(into), "--segments-dir", str(segments))
    target = bench.redis("target")
    restore_s, restored = tracker(
        target.url, "restore", str(into), "--segments-dir", str(bench.tmp / "restored-segments")
    )
    if restored["differences"]:
        raise RuntimeError(f"the restored census differs: {restored['differences'][:3]}")
    census = taken["census"][PROJECT]
    files = taken["files"]
    return {
        "items": items,
        "in_redis": census["todo_total"],
        "offloaded": census["offloaded"],
        "segment_files": sum(1 for name in files if name.startswith("segments/")),
        "backup_bytes": sum(f["bytes"] for f in files.values()),
        "snapshot_bytes": sum(f["bytes"] for name, f in files.items() if not name.startswith("segments/")),
        "backup_s": round(backup_s, 2),
        "backup_inside_s": taken["took_s"],
        "leases_held_s": taken["leases_held_s"],
        "restore_s": round(restore_s, 2),
        "restored_keys": restored["keys"],
        "load_and_offload_s": round(loaded_s, 1),
    }


def markdown(result: dict) -> str:
    f = result["figures"]
    rows = [
        f"| {h['date']} | {h['commit']} | {h['headline']['items']:,} | {h['headline']['backup_s']} | "
        f"{h['headline']['leases_held_s']} | {h['headline']['restore_s']} |"
        for h in result["history"]
        if "headline" in h
    ]
    return "\n".join(
        [
            "# Backup and restore",
            "",
            f"{provenance_line(result)} One project of {f['items']:,} URL-like names, "
            f"{f['in_redis']:,} in Redis and {f['offloaded']:,} offloaded to {f['segment_files']} "
            "segment files, backed up by `tracker backup` and restored by `tracker restore` into "
            "an empty Redis (each command's wall time, its start-up included). The restored "
            "census equalled the backup's.",
            "",
            f"- backup: **{f['backup_s']} s** ({f['backup_inside_s']} s inside the command; the "
            f"offload leases, so refills, held **{f['leases_held_s']} s**), "
            f"{f['backup_bytes'] / 1e6:.1f} MB ({f['snapshot_bytes'] / 1e6:.1f} MB of Redis snapshot)",
            f"- restore: **{f['restore_s']} s** ({f['restored_keys']:,} keys)",
            "",
            "## History",
            "",
            "| run | commit | items | backup s | leases held s | restore s |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
            *rows,
            "",
        ]
    )


@case("backup", report=markdown)
def run(bench: Bench) -> dict:
    """What tracker backup and tracker restore cost on a project mostly offloaded."""
    figures = measure(bench, bench.size("items", 1_000_000, quick=20_000))
    headline = {k: figures[k] for k in ("items", "backup_s", "leases_held_s", "restore_s")}
    return {"what": __doc__.splitlines()[0], "figures": figures, "headline": headline}
