"""The backup directory: its manifest, the checksum of every file, and the rule that makes it
whole or absent (written as DIR.partial, fsynced, renamed to DIR)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import BinaryIO

from tracker_core.backup.hold import BackupError
from tracker_core.infra.durable import fsync_dir

FORMAT = "tracker-backup 1"
MANIFEST = "manifest.json"
PARTIAL_SUFFIX = ".partial"
CHUNK = 1 << 20


def partial_of(directory: Path) -> Path:
    return directory.with_name(directory.name + PARTIAL_SUFFIX)


def _read(source: Path, sink: BinaryIO | None = None) -> dict:
    """{"bytes", "sha256"} of SOURCE, read in chunks (each written to SINK too, when given)."""
    digest, size = hashlib.sha256(), 0
    with open(source, "rb") as src:
        while chunk := src.read(CHUNK):
            if sink is not None:
                sink.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    return {"bytes": size, "sha256": digest.hexdigest()}


def copy_file(source: Path, target: Path) -> dict:
    """Copy SOURCE to TARGET (fsynced); {"bytes", "sha256"} of what was copied."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as dst:
        copied = _read(source, dst)
        dst.flush()
        os.fsync(dst.fileno())
    return copied


def checksum(path: Path) -> dict:
    return _read(path)


def finish(partial: Path, final: Path, manifest: dict) -> None:
    """Write MANIFEST into PARTIAL, fsync every folder, and rename PARTIAL to FINAL."""
    path = partial / MANIFEST
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    for folder in sorted((p for p in partial.rglob("*") if p.is_dir()), reverse=True):
        fsync_dir(folder)
    fsync_dir(partial)
    os.rename(partial, final)
    fsync_dir(final.parent)


def files_in(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()} - {MANIFEST}


def verified(directory: Path) -> dict:
    """The manifest of the backup in DIRECTORY once every file checks; BackupError (one line)
    for a missing or unfinished backup, a manifest it cannot read, or a file missing, extra,
    or not the one backed up."""
    if directory.name.endswith(PARTIAL_SUFFIX):
        raise BackupError(f"{directory} is an unfinished backup (never renamed): take another one")
    if not directory.is_dir():
        partial = partial_of(directory)
        more = f" ({partial} is an unfinished one)" if partial.exists() else ""
        raise BackupError(f"no backup at {directory}{more}")
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(f"cannot read {directory / MANIFEST}: {exc}".splitlines()[0]) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{directory / MANIFEST} is not a manifest of {FORMAT!r}")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise BackupError(f"{directory / MANIFEST} lists no files")
    present = files_in(directory)
    missing, extra = sorted(set(files) - present), sorted(present - set(files))
    if missing:
        raise BackupError(f"{len(missing)} files of the backup are missing, e.g. {missing[0]}")
    if extra:
        raise BackupError(f"{len(extra)} files are not in the manifest, e.g. {extra[0]}")
    for name, expected in sorted(files.items()):
        if checksum(directory / name) != expected:
            raise BackupError(f"{name} does not match its checksum in the manifest: damaged or changed")
    return manifest
