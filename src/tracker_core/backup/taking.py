"""`tracker backup DIR`: Redis and the segment files from one moment, while the tracker serves.

Under the backup hold and every offload lease (hold.py): each primary's snapshot, then the
segment files; the snapshot loaded into a private redis-server for the census and the check
that every registered segment has its file. A project created after the leases were taken
has its lease taken too and the snapshot is taken again (ROUNDS at most).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tracker_core import keyspace
from tracker_core.admin.context import connect
from tracker_core.backup import loading, manifest, snapshot
from tracker_core.backup.hold import WAIT_S, BackupError, BackupHold
from tracker_core.donelog import log_archive
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.infra.redis_urls import parse_topology_url
from tracker_core.offload import segment_file, segment_registry
from tracker_core.project.shard_layout import GENERATIONS_FIELD, SHARD_TAGS_FIELD, ShardLayout

ROUNDS = 3
TEMP_SUFFIX = ".part"  # a segment file being written (infra.durable): not yet a segment


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def layouts(client) -> dict[str, ShardLayout]:
    """Every project's shards, as its first shard's settings record them (CLIENT decodes)."""
    found = {}
    for project in sorted(client.smembers(keyspace.PROJECTS)):
        tags, generations = client.hmget(
            keyspace.ProjectKeys(project).settings, SHARD_TAGS_FIELD, GENERATIONS_FIELD
        )
        found[project] = ShardLayout.from_settings(
            project, {SHARD_TAGS_FIELD: tags, GENERATIONS_FIELD: generations}
        )
    return found


def url_db(url: str) -> int:
    spec = parse_topology_url(url)
    if spec["kind"] == "sentinel":
        return spec["db"]
    if spec["kind"] == "cluster":
        return 0
    return int(snapshot.primaries(url)[0][1].connection_pool.connection_kwargs.get("db") or 0)


def copy_segments(source: Path, target: Path) -> dict[str, dict]:
    """Copy every segment file under SOURCE to TARGET; {relative path: checksum}. A file that
    goes while copied (a leftover the cleanup deleted) is not a registered segment: skipped."""
    copied: dict[str, dict] = {}
    if not source.is_dir():
        return copied
    for path in sorted(source.rglob("*")):
        if not path.is_file() or path.name.endswith(TEMP_SUFFIX):
            continue
        relative = path.relative_to(source)
        try:
            copied[str(relative)] = manifest.copy_file(path, target / relative)
        except FileNotFoundError:
            (target / relative).unlink(missing_ok=True)
    return copied


def missing_files(client, found: dict[str, ShardLayout], root: Path) -> list[str]:
    """The registered segment files (queue tails, done log archive) with no file under ROOT."""
    missing = []
    for project, layout in found.items():
        for index, k in enumerate(layout.keys):
            folder = segment_file.shard_directory(root, project, index)
            paths = [
                segment_file.segment_path(folder, project, n) for n in segment_registry.registry(client, k)
            ]
            paths += [
                log_archive.segment_path(folder, project, s[0]) for s in log_archive.registry(client, k)
            ]
            missing += [str(p.relative_to(root)) for p in paths if not p.is_file()]
    return missing


class Loaded:
    """The snapshots of every primary in one private redis-server (the one of a single
    primary, or an empty one that every primary's keys are replayed into)."""

    def __init__(self, rdbs: list[Path], work: Path, db: int):
        self.servers: list[EmbeddedRedis] = []
        self.db = db
        if len(rdbs) == 1:
            self.server = loading.load_rdb(rdbs[0], work / "0")
            self.servers.append(self.server)
            return
        self.server = EmbeddedRedis(work / "all", port=free_port(), extra=["--appendonly", "no"]).start()
        self.servers.append(self.server)
        target = loading.client_of(self.server)
        try:
            for i, rdb in enumerate(rdbs):
                part = loading.load_rdb(rdb, work / str(i))
                try:
                    loading.replay(loading.client_of(part), target)
                finally:
                    part.stop()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.server.port}/{self.db}"

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def backup(
    url: str,
    segments_dir: Path,
    directory: Path,
    tracker: dict,
    log=lambda line: None,
    wait_s: float = WAIT_S,
) -> dict:
    """Back up the tracker on URL with its SEGMENTS_DIR into DIRECTORY (new); the manifest.
    WAIT_S bounds the wait for each lease a running pass holds."""
    directory, segments_dir = Path(directory), Path(segments_dir)
    if directory.exists():
        raise BackupError(f"{directory} exists: give a new directory")
    started, clock = now_text(), time.monotonic()
    partial = manifest.partial_of(directory)
    work = Path(tempfile.mkdtemp(prefix="tracker-backup-"))
    client = connect(url)
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        hold = BackupHold(client, wait_s=wait_s).start()
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    loaded = None
    leased_s: float | None = None  # when the first leases were all held (since the start)
    held_s = 0.0
    try:
        shutil.rmtree(partial, ignore_errors=True)  # a backup cut short (the hold is ours now)
        partial.mkdir(parents=True)
        db = url_db(url)
        found = layouts(client)
        for round_ in range(ROUNDS):
            hold.take(k for layout in found.values() for k in layout.keys)
            if leased_s is None:
                leased_s = time.monotonic() - clock
            log(f"holding the offload leases of {len(hold.leases)} shards after {leased_s:.1f}s")
            shutil.rmtree(partial / "redis", ignore_errors=True)
            (partial / "redis").mkdir()
            nodes, files = [], {}
            for i, (label, node) in enumerate(snapshot.primaries(url)):
                name = f"redis/{i}.rdb"
                files[name] = snapshot.stream_rdb(node, partial / name)
                nodes.append({"node": label, "file": name})
                node.close()
            hold.check()
            # Every project (and shard) in the snapshot is listed now: one created (or grown)
            # since the listing has its leases taken and the snapshot taken again.
            found = layouts(client)
            if all(k.tag in hold.leases for layout in found.values() for k in layout.keys):
                break
            if round_ == ROUNDS - 1:
                raise BackupError("projects kept being created during the backup: run it again")
        log(f"snapshot of {len(nodes)} Redis primaries taken; copying segment files")
        copied = copy_segments(segments_dir, partial / "segments")
        hold.check()
        hold.release()
        held_s = time.monotonic() - clock - (leased_s or 0.0)
        loaded = Loaded([partial / n["file"] for n in nodes], work, db)
        snap = connect(loaded.url)
        try:
            missing = missing_files(snap, layouts(snap), partial / "segments")
        finally:
            snap.close()
        if missing:
            raise BackupError(
                f"{len(missing)} segments the snapshot registers have no file in {segments_dir}, "
                f"e.g. {missing[0]}: is it the segments directory of this Redis?"
            )
        census = loading.census(loaded.url)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        hold.release()
        if loaded is not None:
            loaded.stop()
        shutil.rmtree(work, ignore_errors=True)
    files.update({f"segments/{name}": entry for name, entry in copied.items()})
    result = {
        "format": manifest.FORMAT,
        "tracker": tracker,
        "started_at": started,
        "finished_at": now_text(),
        "took_s": round(time.monotonic() - clock, 3),
        "leases_held_s": round(held_s, 3),
        "holder": hold.holder,
        "host": os.uname().nodename,
        "redis": {"kind": parse_topology_url(url)["kind"], "db": db, "nodes": nodes},
        "segments_dir": str(segments_dir.resolve()),
        "files": files,
        "census": census,
    }
    manifest.finish(partial, directory, result)
    return result
