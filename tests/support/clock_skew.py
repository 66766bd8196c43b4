"""A process whose clock is wrong: libfaketime (Debian's faketime) preloaded with an offset.

The process and everything it forks (bjoern workers) read a wall clock OFFSET off; it shifts the
monotonic clock alike, which the tracker only ever subtracts from itself.
"""

from __future__ import annotations

import os
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def skewed_env(offset: str, base: dict | None = None) -> dict:
    """An environment for a process whose clock runs OFFSET off ("+7h", "-7h", "+30s")."""
    if not LIBFAKETIME.exists():
        raise RuntimeError(f"{LIBFAKETIME} missing: install Debian's faketime (make deps)")
    env = dict(os.environ if base is None else base)
    env.update(LD_PRELOAD=str(LIBFAKETIME), FAKETIME=offset, FAKETIME_NO_CACHE="1")
    return env
