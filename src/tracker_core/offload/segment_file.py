"""The segment file format: item names joined by NUL, zstandard-compressed, written durably;
where a project's (and a shard's) segment files live."""

from __future__ import annotations

import hashlib
from pathlib import Path

import zstandard

from tracker_core.infra import durable

ZSTD_LEVEL = 3
# What a segment file that cannot be read raises (a missing file, a corrupt frame, bad text).
UNREADABLE = (OSError, zstandard.ZstdError, UnicodeDecodeError)


def segment_path(directory: Path, project: str, number: int) -> Path:
    return Path(directory) / project / f"{number}.zst"


def shard_directory(directory: Path, project: str, index: int) -> Path:
    """The segments directory of shard INDEX (docs/sharding.md) of PROJECT: DIRECTORY for the first (its paths
    are a one-shard project's), DIRECTORY/PROJECT.INDEX for the others."""
    return Path(directory) if index == 0 else Path(directory) / f"{project}.{index}"


def shard_folders(directory: Path, project: str) -> list[Path]:
    """The folders of PROJECT's further shards (PROJECT.I) under DIRECTORY."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return [path for path in directory.glob(f"{project}.*") if path.name.split(".", 1)[1].isdigit()]


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
