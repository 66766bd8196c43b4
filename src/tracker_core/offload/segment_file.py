"""The segment file format: item names joined by NUL, zstandard-compressed, written durably."""

from __future__ import annotations

import hashlib
from pathlib import Path

import zstandard

from tracker_core import durable

ZSTD_LEVEL = 3
# What a segment file that cannot be read raises (a missing file, a corrupt frame, bad text).
UNREADABLE = (OSError, zstandard.ZstdError, UnicodeDecodeError)


def segment_path(directory: Path, project: str, number: int) -> Path:
    return Path(directory) / project / f"{number}.zst"


def items_digest(items: list[str]) -> str:
    """What identifies a segment's items across export and import (order as in the file)."""
    return hashlib.sha256("\0".join(items).encode("utf-8", "surrogateescape")).hexdigest()


def write_segment(path: Path, items: list[str]) -> None:
    """Write ITEMS (NUL-separated, zstandard) durably: temp file, fsync, rename, fsync dir."""
    data = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(
        "\0".join(items).encode("utf-8", "surrogateescape")
    )
    durable.write_file(path, lambda f: f.write(data))


def read_segment(path: Path) -> list[str]:
    with open(path, "rb") as f:
        data = zstandard.ZstdDecompressor().stream_reader(f).read()
    text = data.decode("utf-8", "surrogateescape")
    return text.split("\0") if text else []
