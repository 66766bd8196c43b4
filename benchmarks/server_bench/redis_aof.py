"""Redis's AOF rewrites, as benchmarks need them: wait for one under way, or compact the AOF now
(capacity.py before each constant-rate run, aof_rewrites.py before each measured run)."""

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
