"""What a `kill -9` of redis-server loses under `appendfsync everysec` when the disk is busy.

Redis answers a write once it is in its AOF buffer, and writes the buffer out before its next
event-loop turn, except under everysec while the background fsync of the last second still
runs: then it postpones the write for up to 2 s (it would block behind the fsync) and goes on
answering. A kill in that time loses the buffer. docs/faults.md ("The AOF window") and the fault
suite's ledger (benchmarks/chaos/ledger.py, LOSS_WINDOW_S) rest on this, so it is measured here.

Each trial: a private redis-server (embedded defaults: AOF on, everysec) on this disk, one
client acknowledging INCRs in a loop, and another process writing large files to the same
disk so that fsync is slow. As soon as `INFO persistence` shows a postponed buffer
(`aof_buffer_length` > 0 with an fsync pending), Redis is killed with SIGKILL and restarted from
its AOF; the trial reports how many acknowledged INCRs the restarted Redis does not have. A trial
that never sees a postponed buffer in its time kills anyway and says so.

    .venv/bin/python benchmarks/aof_kill_window.py [--trials 4] [--out DIR]

Writes benchmarks/results/aof_kill_window.json. Not in `make bench`: it loads the disk on purpose.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis
from server_bench.results_file import run_header, write_results

from tracker_core.infra import processes
from tracker_core.infra.embedded import EmbeddedRedis
from tracker_core.infra.processes import free_port

RESULTS = Path(__file__).with_name("results")
WATCH_S = 20.0  # how long a trial waits for a postponed buffer


def postponed(info: dict) -> bool:
    return info.get("aof_buffer_length", 0) > 0 and info.get("aof_pending_bio_fsync", 0) > 0


def trial(scratch: Path) -> dict:
    data = Path(tempfile.mkdtemp(prefix="aof-kill-", dir=scratch))
    port = free_port()
    server = EmbeddedRedis(data, port=port).start()
    writer_conn, watcher = redis.Redis(port=port), redis.Redis(port=port)
    acked, stop = [0], threading.Event()

    def write() -> None:
        while not stop.is_set():
            try:
                acked[0] = writer_conn.incr("n")
            except redis.RedisError:
                return

    # Its own process group, so that the stop below ends dd too, not only the shell (an orphaned
    # dd would go on writing its 1.5 GB after the trial), and waits until it has.
    disk_load = processes.start(
        ["sh", "-c", f"while :; do dd if=/dev/zero of={data}/load bs=1M count=1500 status=none; sync; done"],
        new_session=True,
        die_with_parent_sig=signal.SIGKILL,
    )
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    seen, started = None, time.monotonic()
    try:
        while time.monotonic() - started < WATCH_S:
            info = watcher.info("persistence")
            if postponed(info):
                seen = {k: info[k] for k in ("aof_buffer_length", "aof_pending_bio_fsync")}
                break
            time.sleep(0.002)
        server.process.kill()
        server.process.wait()
    finally:
        stop.set()
        writer.join(timeout=10)
        processes.stop(disk_load, sig=signal.SIGKILL, group=True, timeout_s=60)
    last_acked = acked[0]
    restarted = EmbeddedRedis(data, port=port).start()
    try:
        kept = int(redis.Redis(port=port).get("n") or 0)
    finally:
        restarted.stop()
        shutil.rmtree(data, ignore_errors=True)
    # One INCR may have run without its answer arriving: kept can exceed what was acknowledged.
    return {
        "postponed_buffer_seen": seen,
        "acked": last_acked,
        "kept": kept,
        "lost": max(0, last_acked - kept),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--scratch", type=Path, default=None, help="a directory on the disk to test")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    scratch = Path(tempfile.mkdtemp(prefix="aof-kill-window-", dir=args.scratch))
    try:
        trials = [trial(scratch) for _ in range(args.trials)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = {
        **run_header("benchmarks/aof_kill_window.py", argv, load),
        "redis": subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip(),
        "trials": trials,
        "acknowledged_writes_lost_max": max(t["lost"] for t in trials),
    }
    write_results(args.out, "aof_kill_window", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
