"""Write a file so that it is whole on disk or absent, whatever crashes when.

Segment files (offloaded queue tails, the archived done log) leave Redis only once they are on
disk: a file is written under a temporary name, fsynced, renamed into place and its directory
fsynced, so after a crash at any point the name holds the whole file or nothing.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_file(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Create PATH durably: WRITE(f) fills a temporary file that then replaces PATH."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.part")
    try:
        with open(temp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the entries of folder PATH (a file created or renamed in it) durable."""
    dir_fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
