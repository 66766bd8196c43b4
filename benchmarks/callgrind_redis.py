"""A redis-server under valgrind's callgrind, for benchmarks that count instructions: a figure
the shared machine's load cannot move (claim_cost_instructions.py, bloom_kinds.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from tracker_core.infra.embedded import free_port

CALL_TIMEOUT_S = 900  # a call under callgrind runs some 50x slower


@contextmanager
def redis_under_callgrind(toggle: str, out: Path, directory: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """Yield (the valgrind process, a redis:// URL) of a redis-server on a free loopback port,
    counted only inside the function TOGGLE (--toggle-collect), its profile written to OUT (and
    OUT.1, OUT.2 ... on each `callgrind_control -d`); shut down without saving on exit, which
    writes the final profile."""
    port = free_port()
    command = ["valgrind", "--tool=callgrind", f"--toggle-collect={toggle}", f"--callgrind-out-file={out}"]
    command += [shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    command += ["--save", "", "--appendonly", "no", "--dir", str(directory)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn = redis.Redis(port=port, socket_timeout=CALL_TIMEOUT_S)
    try:
        for _ in range(600):
            try:
                conn.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        yield server, f"redis://127.0.0.1:{port}/0"
    finally:
        try:
            conn.shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # the shutdown closes the connection
        try:
            server.wait(timeout=CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            raise


def total_instructions(profile_text: str) -> int:
    """The instructions a callgrind profile counted in all (its `summary:` line)."""
    return int(re.search(r"^summary: (\d+)", profile_text, re.M)[1])


def count_instructions(toggle: str, work: Callable[[str], object], keep_profile: Path | None = None) -> int:
    """Instructions a fresh redis-server under callgrind runs inside TOGGLE while WORK(url) runs
    against it (the setting-up WORK does outside TOGGLE not counted); with KEEP_PROFILE, the
    profile is copied there (for callgrind_annotate)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        with redis_under_callgrind(toggle, out, Path(tmp)) as (_, url):
            work(url)
        if keep_profile:
            shutil.copy(out, keep_profile)
        return total_instructions(out.read_text(errors="replace"))
