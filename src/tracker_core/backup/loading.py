"""Private redis-servers on a snapshot, the replay of keys from one Redis into another, and the
census of every project of a Redis."""

from __future__ import annotations

from pathlib import Path

import redis

from tracker_core import keyspace
from tracker_core.admin import census_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.backup.hold import BackupError
from tracker_core.infra.embedded import EmbeddedRedis, RedisServerError, free_port

REPLAY_BATCH = 200  # keys per DUMP and RESTORE pipeline (a Bloom chunk is a few MB)


def load_rdb(rdb: Path, work: Path) -> EmbeddedRedis:
    """A private redis-server (loopback, no persistence) started on a copy of the snapshot RDB
    under WORK; BackupError when it cannot load it."""
    work.mkdir(parents=True, exist_ok=True)
    # A link will do: the private server never writes it (no save points, no AOF), and the
    # backup may be on a read-only mount.
    (work / "dump.rdb").symlink_to(Path(rdb).resolve())
    server = EmbeddedRedis(work, port=free_port(), extra=["--appendonly", "no", "--save", ""])
    try:
        server.start(timeout_s=600)
    except RedisServerError as exc:
        raise BackupError(f"redis-server could not load {rdb.name}: {exc} ({work / 'redis.log'})") from None
    return server


def client_of(server: EmbeddedRedis, db: int = 0, decode: bool = False) -> redis.Redis:
    return redis.Redis(
        "127.0.0.1", server.port, db=db, decode_responses=decode, encoding_errors="surrogateescape"
    )


def replay(
    source: redis.Redis,
    target,
    replace: bool = False,
) -> int:
    """Copy every key of SOURCE (a plain client) into TARGET (redis-py, a Cluster's too) with
    DUMP and RESTORE, each key's time to live kept; the keys copied. REPLACE overwrites keys
    TARGET holds (else such a key is an error)."""
    copied = 0
    batch: list[bytes] = []

    def flush() -> None:
        nonlocal copied
        read = source.pipeline(transaction=False)
        for key in batch:
            read.dump(key)
            read.pttl(key)
        replies = read.execute()
        write = target.pipeline(transaction=False)
        for key, payload, ttl in zip(batch, replies[::2], replies[1::2]):
            if payload is None or ttl == -2:  # expired since the scan
                continue
            write.restore(key, max(ttl, 0), payload, replace=replace)
            copied += 1
        write.execute()
        batch.clear()

    for key in source.scan_iter(count=1000):
        batch.append(key)
        if len(batch) >= REPLAY_BATCH:
            flush()
    if batch:
        flush()
    return copied


def census(url: str) -> dict[str, dict]:
    """`tracker status` of every project of the Redis at URL."""
    ctx = AdminContext.from_url(url)
    try:
        return {
            project: census_verbs.status(ctx, project)
            for project in sorted(ctx.conn.smembers(keyspace.PROJECTS))
        }
    finally:
        ctx.conn.close()
