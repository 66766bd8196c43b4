"""The installed `tracker` command run to its end, as an operator runs it from a shell."""

from __future__ import annotations

import os
import subprocess

from support.paths import TRACKER_BIN

# The tests' own TRACKER_* settings stay out: a command sees only what its arguments say.
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("TRACKER_")}


def run_tracker(*args, check: bool = False, timeout: float = 300, env: dict | None = None):
    """`tracker ARGS...` (each made a string) -> CompletedProcess with text output; with CHECK,
    its exit status must be 0 (else the assertion shows its stderr)."""
    result = subprocess.run(
        [TRACKER_BIN, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env or CLEAN_ENV
    )
    assert not check or result.returncode == 0, result.stderr
    return result
