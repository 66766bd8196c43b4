"""`tracker restore DIR`: a backup brought back into a stopped deployment.

Each snapshot is loaded into a private redis-server and every key replayed into the target
with DUMP and RESTORE (loading.replay), times to live kept, the backup's own hold and leases
left out. Chosen over placing the RDB in the target's data directory because it needs no
access to that directory nor a restart of the target: it works on a remote or managed Redis,
a container's, each primary of a Cluster (every key goes to its slot's owner whatever the
slots were at the backup), and the embedded Redis; and the target's AOF (appendonly yes, as the
Ansible role and the embedded Redis run) records the keys as they come, so no AOF manifest has
to be forged for it. It costs a private redis-server with the memory of one snapshot.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import redis

from tracker_core import keyspace
from tracker_core.backup import loading, manifest, snapshot, taking
from tracker_core.backup.hold import BackupError
from tracker_core.infra import durable, topology
from tracker_core.infra.embedded import EmbeddedRedis


def check_target(url: str, force: bool) -> None:
    """BackupError unless every primary of URL holds no key and has no other client (FORCE:
    restore over whatever is there, to finish a restore cut short)."""
    for label, node in snapshot.primaries(url):
        try:
            keys = node.dbsize()
            me = node.client_id()
            others = [
                c for kind in ("normal", "pubsub") for c in node.client_list(_type=kind) if int(c["id"]) != me
            ]
        finally:
            node.close()
        if force:
            continue
        if keys:
            raise BackupError(f"Redis {label} holds {keys} keys: restore into an empty Redis (or --force)")
        if others:
            raise BackupError(
                f"Redis {label} has {len(others)} other clients (a tracker still running?): "
                "stop every tracker process first (or --force)"
            )


def check_segments(directory: Path, force: bool) -> None:
    if not force and directory.is_dir() and any(p.is_file() for p in directory.rglob("*")):
        raise BackupError(f"{directory} holds files: restore into an empty segments directory (or --force)")


def drop_own_leases(client: redis.Redis, holder: str) -> None:
    """Delete the backup hold and the leases the backup held from a loaded snapshot (CLIENT
    decodes): restored, they would keep every maintainer waiting until they expired."""
    client.delete(keyspace.BACKUP_HOLD)
    for layout in taking.layouts(client).values():
        for k in layout.keys:
            if client.get(k.maintain_lease) == holder:
                client.delete(k.maintain_lease)


def put_segments(backup: Path, directory: Path) -> int:
    """Copy the backup's segment files into DIRECTORY (each whole or absent); how many."""
    source = backup / "segments"
    count = 0
    for path in sorted(source.rglob("*")) if source.is_dir() else []:
        if path.is_file():
            with open(path, "rb") as src:  # each file whole or absent, fsynced with its folder
                durable.write_file(directory / path.relative_to(source), lambda f: shutil.copyfileobj(src, f))
            count += 1
    for folder in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        durable.fsync_dir(folder)  # the folders made on the way
    return count


def differences(expected: dict, found: dict, prefix: str = "") -> list[str]:
    """Where FOUND differs from EXPECTED (nested dicts), one line each."""
    lines = []
    for name in sorted(set(expected) | set(found), key=str):
        a, b = expected.get(name), found.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            lines += differences(a, b, f"{prefix}{name}.")
        elif a != b:
            lines.append(f"{prefix}{name}: {a} at the backup, {b} now")
    return lines


def restore(
    directory: Path, url: str, segments_dir: Path, force: bool = False, log=lambda line: None
) -> dict:
    """Restore the backup in DIRECTORY into the Redis at URL and SEGMENTS_DIR; the census
    compared with the manifest's ("differences": none when every count is back)."""
    directory, segments_dir = Path(directory), Path(segments_dir)
    m = manifest.verified(directory)
    log(f"backup of {m['finished_at']} checked: {len(m['files'])} files")
    check_target(url, force)
    check_segments(segments_dir, force)
    target = topology.admin_client(url, decode_responses=False)
    keys = 0
    work = Path(tempfile.mkdtemp(prefix="tracker-restore-"))
    try:
        for i, node in enumerate(m["redis"]["nodes"]):
            server = loading.load_rdb(directory / node["file"], work / str(i))
            try:
                db = int(m["redis"].get("db") or 0)
                drop_own_leases(loading.client_of(server, db=db, decode=True), m["holder"])
                source = loading.client_of(server, db=db)
                keys += loading.replay(source, target, replace=force)
            finally:
                server.stop()
            log(f"snapshot of {node['node']} restored")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        target.close()
    segments_dir.mkdir(parents=True, exist_ok=True)
    files = put_segments(directory, segments_dir)
    census = loading.census(url)
    return {
        "backup": str(directory),
        "taken_at": m["finished_at"],
        "keys": keys,
        "segment_files": files,
        "census": census,
        "differences": differences(m["census"], census),
    }


def embedded_target(data_dir: Path) -> EmbeddedRedis:
    """The embedded Redis of a `tracker run` on DATA_DIR, started for the restore; BackupError
    when it runs already (the tracker was not stopped)."""
    server = EmbeddedRedis(Path(data_dir) / "redis")
    if server.socket_path.exists():
        try:
            if redis.Redis(unix_socket_path=str(server.socket_path), socket_timeout=2).ping():
                raise BackupError(f"the embedded Redis of {data_dir} is running: stop `tracker run` first")
        except redis.RedisError:
            pass
    return server.start()
