"""A Redis primary's data as a replica receives it: SYNC over a redis-py connection, the RDB
payload written to a file. No access to the Redis host's disk is needed (a remote Redis, a
container's, the embedded one's Unix socket all work), and Redis forks to write it, as for a
replica, without touching its own files or its AOF."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import redis
from redis.sentinel import Sentinel

from tracker_core.backup.hold import BackupError
from tracker_core.infra.redis_urls import parse_topology_url

CHUNK = 1 << 20
EOF_MARK_BYTES = 40  # diskless replication ends the payload with a 40-byte mark ($EOF:MARK)


def primaries(url: str) -> list[tuple[str, redis.Redis]]:
    """(label, a plain redis-py client) for every primary of URL: the one Redis, Sentinel's
    current primary, or each primary of a Cluster."""
    spec = parse_topology_url(url)
    if spec["kind"] == "single":
        client = redis.Redis.from_url(url)
        kwargs = client.connection_pool.connection_kwargs
        label = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
        return [(label, client)]
    if spec["kind"] == "sentinel":
        host, port = Sentinel(spec["sentinels"], socket_timeout=10).discover_master(spec["service"])
        return [(f"{host}:{port}", redis.Redis(host, port, db=spec["db"], password=spec["password"]))]
    found = []
    for host, port in spec["nodes"]:
        try:
            nodes = redis.Redis(host, port, password=spec["password"], socket_timeout=10).cluster("nodes")
        except redis.RedisError:
            continue
        for address, info in nodes.items():
            flags = info.get("flags", "")
            if "master" in flags and "fail" not in flags and info.get("slots"):
                h, p = address.split("@")[0].rsplit(":", 1)
                found.append((f"{h}:{p}", redis.Redis(h, int(p), password=spec["password"])))
        break
    if not found:
        raise BackupError("no node of the cluster answered CLUSTER NODES")
    return sorted(found, key=lambda pair: pair[0])


def stream_rdb(client: redis.Redis, path: Path, timeout_s: float = 600.0) -> dict:
    """Write CLIENT's Redis data to PATH (an RDB file, fsynced); {"bytes", "sha256"}."""
    conn = client.connection_pool.make_connection()
    conn.connect()
    digest = hashlib.sha256()
    size = 0
    try:
        try:  # Redis 7.0+: the RDB only, no replication stream after it
            conn.send_command("REPLCONF", "rdb-only", "1")
            conn.read_response()
        except redis.ResponseError:
            pass
        conn.send_command("SYNC")
        sock = conn._sock
        sock.settimeout(timeout_s)
        stream = sock.makefile("rb")
        line = b"\n"
        while line in (b"\n", b"\r\n"):  # newlines keep the link alive while Redis forks
            line = stream.readline()
        if not line.startswith(b"$"):
            reason = line.decode("utf-8", "replace").strip() or "the connection closed"
            raise BackupError(f"Redis refused to send a snapshot: {reason}")
        header = line.rstrip(b"\r\n")
        with open(path, "wb") as f:

            def write(data: bytes) -> None:
                nonlocal size
                f.write(data)
                digest.update(data)
                size += len(data)

            if header.startswith(b"$EOF:"):
                mark, pending = header[5:], b""
                while True:
                    chunk = stream.read1(CHUNK)
                    if not chunk:
                        raise BackupError("the snapshot stream ended before its end mark")
                    data = pending + chunk
                    end = data.find(mark)
                    if end >= 0:
                        write(data[:end])
                        break
                    write(data[:-EOF_MARK_BYTES])
                    pending = data[-EOF_MARK_BYTES:]
            else:
                left = int(header[1:])
                while left:
                    chunk = stream.read1(min(CHUNK, left))
                    if not chunk:
                        raise BackupError("the snapshot stream ended early")
                    write(chunk)
                    left -= len(chunk)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise BackupError(f"copying the snapshot failed: {exc}".splitlines()[0]) from None
    finally:
        conn.disconnect()
    if size < 9:
        raise BackupError("Redis sent an empty snapshot")
    return {"bytes": size, "sha256": digest.hexdigest()}
