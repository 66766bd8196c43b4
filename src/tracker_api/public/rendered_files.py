"""The rendered answers of anonymous aggregates, as files shared by the renderer and the workers.

Owns the directory of one server run (made before the workers fork, removed at the end), one file
per key (its name a hash of the key, its content the status and headers as JSON, a newline, then
the body), replaced whole so that a reader never sees half of one, and trimmed by age and size.
The workers ask the renderer for a key by a datagram on the directory's Unix socket.
public_cache.py is the workers' side, public_renderer.py the renderer's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

DEFAULT_MAX_AGE_S = 1.0  # a file younger than this is served as it is
STALE_S = 30.0  # a file older than this is trimmed, and served only when no new render comes
MAX_KEY_CHARS = 1024
MAX_FILES_BYTES = 256 << 20
MEMO_BYTES = 64 << 20  # what a worker keeps of the files it read
SOCKET_NAME = "render.sock"
_PREFIX = "tracker-public-"


@dataclass(frozen=True)
class Entry:
    """One rendered answer, as read from its file."""

    status: str
    headers: list
    body: bytes
    rendered_at: float  # the renderer's monotonic time (the same clock for every process here)
    identity: tuple  # the file's (inode, mtime, size) it was read from


def prepare_directory() -> tuple[str, Callable[[], None]]:
    """Before forking: a directory for the rendered files and the renderer's socket, and what
    removes it at the end."""
    made = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-")
    return made, lambda: _remove_tree(made)


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def file_name(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def encode(status: str, headers: list, body: bytes, rendered_at: float) -> bytes:
    head = orjson.dumps({"status": status, "headers": headers, "rendered_at": rendered_at})
    return head + b"\n" + body


def decode(data: bytes, identity: tuple) -> Entry:
    head, _, body = data.partition(b"\n")
    meta = orjson.loads(head)
    return Entry(meta["status"], [tuple(h) for h in meta["headers"]], body, meta["rendered_at"], identity)


class Store:
    """The rendered files of one server run: written by the renderer, read by every worker."""

    def __init__(self, directory: str):
        self.directory = Path(directory)
        self.socket_path = str(self.directory / SOCKET_NAME)
        self._memo: dict[str, Entry] = {}
        self._memo_bytes = 0
        self._ask_sock: socket.socket | None = None

    def read(self, key: str) -> Entry | None:
        """KEY's rendered answer, or None when there is none."""
        name = file_name(key)
        path = self.directory / name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        identity = (st.st_ino, st.st_mtime_ns, st.st_size)
        known = self._memo.get(name)
        if known is not None and known.identity == identity:
            return known
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:  # removed between the stat and the open: as if never made
            return None
        entry = decode(data, identity)
        if self._memo_bytes + len(entry.body) > MEMO_BYTES:
            self._memo.clear()
            self._memo_bytes = 0
        if known is not None:
            self._memo_bytes -= len(known.body)
        self._memo[name] = entry
        self._memo_bytes += len(entry.body)
        return entry

    def write(self, key: str, status: str, headers: list, body: bytes) -> None:
        """Replace KEY's file whole (a reader sees the old file or the new one, never half)."""
        final = self.directory / file_name(key)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode(status, headers, body, time.monotonic()))
            os.replace(temporary, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            raise

    def ask(self, key: str) -> bool:
        """Ask the renderer for KEY; whether the datagram left (dropped when it is behind)."""
        if self._ask_sock is None:
            self._ask_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._ask_sock.setblocking(False)
        try:
            self._ask_sock.sendto(key.encode("utf-8", "surrogateescape"), self.socket_path)
        except OSError:  # no renderer yet, or its queue is full: the next request asks again
            return False
        return True

    def trim(self, max_bytes: int = MAX_FILES_BYTES) -> int:
        """Remove files older than STALE_S, then the oldest until they hold at most MAX_BYTES."""
        files = []
        for entry in os.scandir(self.directory):
            if entry.name == SOCKET_NAME:
                continue
            with contextlib.suppress(FileNotFoundError):
                st = entry.stat()
                files.append((st.st_mtime, st.st_size, entry.path))
        files.sort()
        total = sum(size for _, size, _ in files)
        removed = 0
        wall = time.time()
        for mtime, size, path in files:
            if wall - mtime <= STALE_S and total <= max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed += 1
            total -= size
        return removed
