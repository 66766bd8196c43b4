"""Redis's AOF, as benchmarks need it: wait for a rewrite under way, compact the AOF now
(capacity.py before each constant-rate run, aof_rewrites.py before each measured run), or wait
until Redis has written every acknowledged write to it (aof_rewrites.py before it kills Redis)."""

from __future__ import annotations

import time

import redis


def rewriting(conn) -> bool:
    persistence = conn.info("persistence")
    return bool(persistence["aof_rewrite_in_progress"] or persistence["aof_rewrite_scheduled"])


def wait_for_rewrite(conn, timeout_s: float = 60.0) -> None:
    """Return once no AOF rewrite is under way or scheduled; TimeoutError past TIMEOUT_S."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not rewriting(conn):
            return
        time.sleep(0.01)
    raise TimeoutError(f"Redis's AOF rewrite took longer than {timeout_s} s")


def compact_aof(conn, timeout_s: float = 60.0) -> None:
    """Rewrite Redis's AOF now and wait until it is done (and any rewrite already under way).

    Loading items appends to the AOF, and Redis may start a rewrite of its own meanwhile, even
    between the check below and BGREWRITEAOF, which Redis then refuses ("already in progress"):
    that one is waited for instead."""
    if not rewriting(conn):
        try:
            conn.bgrewriteaof()  # answers once the child is forked or the rewrite is scheduled
        except redis.ResponseError as exc:
            if "already in progress" not in str(exc):
                raise
    wait_for_rewrite(conn, timeout_s)


def wait_for_aof_written(conn, timeout_s: float = 10.0) -> None:
    """Return once Redis has written its AOF buffer to the file; TimeoutError past TIMEOUT_S.

    Under appendfsync everysec Redis answers a write before writing it, and while the fsync of
    the last second is slow (a busy disk) it postpones the write for up to 2 s (docs/faults.md,
    "The AOF window"): a kill -9 then loses what it acknowledged. Once the buffer is written the
    kernel holds it, and a kill of Redis loses none of it. With no new writes Redis writes the
    buffer within about 2 s, whatever the disk does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not conn.info("persistence").get("aof_buffer_length", 0):
            return
        time.sleep(0.01)
    raise TimeoutError(f"Redis kept an unwritten AOF buffer for {timeout_s} s")
