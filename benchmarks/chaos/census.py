"""Where every item of a project is, read from Redis (key names from tracker_core.keyspace).

The places (docs/data-model.md's invariant): a todo queue (the shared ones, each downloader's own, the
items held back by a limit in its sub-queue or on their way in), out, done, offloaded (segments
on disk or on their way to one), dead. Every loaded item must be in exactly one of them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_file, segment_registry
from tracker_core.scripts.derived_counters import with_derived


def _held_name(entry: str) -> str:
    return entry.split("\0", 1)[1]  # "LIMIT\0ITEM"


def places(
    r, project: str, segments_dir: Path | None = None, k: ProjectKeys | None = None
) -> dict[str, Counter]:
    """Place name -> Counter of the items found there (an item twice in one place counts 2).
    K: the keys of one shard of a sharded project (by default the project's first)."""
    k = ProjectKeys(project) if k is None else k
    found: dict[str, Counter] = {}
    for name, key in zip(("todo", "backfeed", "secondary", "redo"), k.shared_queues()):
        found[name] = Counter(r.sscan_iter(key, count=5000))
    own = Counter()
    for owner in r.smembers(k.downloader_queues):
        own.update(r.sscan_iter(k.downloader_queue(owner), count=5000))
    found["downloader"] = own
    found["limited"] = Counter(_held_name(e) for e in r.zrange(k.limited, 0, -1))
    found["limited_in"] = Counter(_held_name(e) for e in r.sscan_iter(k.limited_in, count=5000))
    found["out"] = Counter(r.zrange(k.out, 0, -1))
    found["done"] = Counter(r.sscan_iter(k.done, count=5000))
    found["dead"] = Counter(r.hkeys(k.dead))
    staged = Counter(r.sscan_iter(k.offloading, count=5000))
    if segments_dir is not None:
        for number in segment_registry.registry(r, k):
            staged.update(segment_file.read_segment(segment_file.segment_path(segments_dir, project, number)))
    found["offloaded"] = staged
    return found


def where(found: dict[str, Counter]) -> Counter:
    """Item -> in how many places it is (all places summed)."""
    total = Counter()
    for counter in found.values():
        total.update(counter)
    return total


def counter_checks(r, project: str, k: ProjectKeys | None = None) -> dict[str, list]:
    """The counters against the sets they count; each failed check -> [expected, found]. K: the
    keys of one shard of a sharded project, whose counters count that shard's items."""
    k = ProjectKeys(project) if k is None else k
    # As every reader sees them: one-item dones count done_one_le_B (derived_counters).
    stats = with_derived({f: int(v) for f, v in r.hgetall(k.stats).items()}, totals=True)
    done_kept = r.scard(k.done)
    out = set(r.zrange(k.out, 0, -1))
    claims = r.hgetall(k.claims)
    held = {d: int(n) for d, n in r.hgetall(k.downloader_claims).items()}
    owners = Counter(c.split("\t")[0] for c in claims.values())
    per_downloader = sum(int(v) for v in r.hvals(k.downloader_count))
    domain_bytes = sum(int(v) for v in r.hvals(k.domain_bytes))
    board_bytes = sum(int(s) for _, s in r.zrange(k.downloader_bytes, 0, -1, withscores=True))
    checks = {
        # done_mode=keep: every done item stays in `done`.
        "items_done == |done|": [done_kept, stats.get("items_done", 0)],
        "sum(downloader_count) == items_done": [stats.get("items_done", 0), per_downloader],
        "claims keys == out": [len(out), len(out & set(claims)) if set(claims) == out else -1],
        "sum(downloader_claims) == |out|": [len(out), sum(held.values())],
        "downloader_claims == owners of claims": [dict(owners), {d: n for d, n in held.items() if n}],
        "bytes_done == sum(domain_bytes)": [stats.get("bytes_done", 0), domain_bytes],
        "bytes_done == sum(downloader_bytes)": [stats.get("bytes_done", 0), board_bytes],
    }
    return {name: pair for name, pair in checks.items() if pair[0] != pair[1]}
