"""The segment registry in Redis: which segments count, where their items came from.

`{P}:segments` maps a segment number to its item count (plus '#next', the last number given
out); `{P}:segment_queues` maps it to its source queue (or done), plus '#staged', the number
and source of the set in `{P}:offloading`. Only registered segments count: a file on disk that
the registry does not name is a leftover (see staging.cleanup_files).
"""

from __future__ import annotations

from tracker_core import keyspace

NEXT_FIELD = "#next"
STAGED_FIELD = "#staged"
QUEUES = keyspace.SHARED_QUEUES  # offloaded past the watermarks, refilled
DONE = "done"  # offloaded with done_mode=offload, kept


class OffloadError(ValueError):
    """A bad segment request; the message is one line."""


def registry(client, k: keyspace.ProjectKeys) -> dict[int, int]:
    """Registered segments: number -> items. CLIENT replies in text, as every core client does."""
    return {int(n): int(c) for n, c in client.hgetall(k.segments).items() if not n.startswith("#")}


def segment_sources(client, k: keyspace.ProjectKeys) -> dict[int, str]:
    """Registered segments: number -> the queue (or done) their items came from."""
    counts = registry(client, k)
    named = {int(n): q for n, q in client.hgetall(k.segment_queues).items() if not n.startswith("#")}
    return {n: named.get(n, "todo") for n in counts}


def staged(client, k: keyspace.ProjectKeys) -> tuple[int | None, str]:
    """The segment number and source of the set in `offloading` (None, 'todo' when unknown)."""
    value = client.hget(k.segment_queues, STAGED_FIELD)
    if not value:
        return None, "todo"
    number, _, source = value.partition(" ")
    return int(number), source


def offloaded_count(client, k: keyspace.ProjectKeys) -> int:
    """Queued items offloaded (in registered segments or staged); done segments not included."""
    sources = segment_sources(client, k)
    total = sum(c for n, c in registry(client, k).items() if sources.get(n) != DONE)
    return total + (client.scard(k.offloading) if staged(client, k)[1] != DONE else 0)


def source_key(k: keyspace.ProjectKeys, name: str) -> str:
    """The key of source NAME (a shared queue or done); OffloadError for anything else."""
    if name == DONE:
        return k.done
    if name not in QUEUES:
        raise OffloadError(f"segments hold todo, backfeed, secondary, redo or done, not {name!r}")
    return k.queue(name)


def forget_project(client, project: str) -> None:
    """Called when PROJECT is deleted: a maintainer removes its segment files from disk."""
    client.sadd(keyspace.SEGMENTS_DELETED, project)
