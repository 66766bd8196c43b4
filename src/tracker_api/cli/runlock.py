"""One `tracker run` per data directory: an exclusive flock held for the life of the process.

A second run on the same directory would start a second redis-server on the same AOF and delete
the socket the first still serves. The kernel drops the lock when the holder dies, even by
`kill -9` (its forked workers hold it a moment longer: they die with it), so no stale lock file
ever needs cleaning up.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_NAME = "tracker.lock"


class DataDirBusy(RuntimeError):
    """Another process holds the data directory; the message is one line."""


def lock_data_dir(data_dir: str | os.PathLike) -> int:
    """Take the data directory's lock and return its descriptor (keep it open), or raise."""
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirBusy(
            f"data directory {directory} is in use by another tracker run "
            f"(pid {holder}); stop it first or use another --data-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd
