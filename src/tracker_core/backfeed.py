"""Backfeed on the hot path: split a posted body into items and dedup them through the filter.

Items discovered by workers arrive as one body joined by a delimiter; each is queued to
``todo:backfeed`` (or the queue its shard is mapped to) only if the project's Bloom filter has
never seen its dedup key, the part before the first ``itemseparator`` when one is given.
Like every way in, backfeed classifies: an item whose dedup key matches a pattern or item-type
limit is held in the limit's sub-queue instead (unless its shard maps to one downloader's own
queue), through the same Bloom filter call, so it is deduplicated exactly like the others.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from tracker_core import backfeed_secrets, bloom, protocol
from tracker_core import limits as limits_mod

SHARD_MAP_TTL_S = 1.0   # an admin's new shard mapping reaches every process within a second

MAX_ITEMS_PER_POST = 10_000
MAX_ITEM_BYTES = protocol.MAX_ITEM_CHARS   # bytes >= characters: every entry can be done


class BadBatch(ValueError):
    """The body can't be taken as items (too many, too long); the message is one line."""


def split_body(body: bytes, delimiter: bytes, separator: bytes | None) -> tuple[list, list]:
    """Return (entries, dedup keys) of BODY; empty entries (a trailing delimiter) are skipped."""
    entries = [e for e in body.split(delimiter) if e]
    if len(entries) > MAX_ITEMS_PER_POST:
        raise BadBatch(f"too many items: at most {MAX_ITEMS_PER_POST} per post")
    for entry in entries:
        if len(entry) > MAX_ITEM_BYTES:
            raise BadBatch(f"item longer than {MAX_ITEM_BYTES} bytes")
    if separator is None:
        return entries, entries
    return entries, [e.split(separator, 1)[0] for e in entries]


@dataclass
class Outcome:
    status: int          # bloom.OK, UNKNOWN_PROJECT or WRONG_SECRET
    received: int = 0
    new: int = 0
    seen: int = 0


class Backfeed:
    """The backfeed path of one process, over the engine's raw connection."""

    def __init__(self, engine, batch: int = bloom.BATCH):
        self.engine = engine
        self.batch = batch
        self._filters: dict[str, bloom.BloomFilter] = {}
        self._shard_maps: dict[str, tuple[float, dict]] = {}

    def filter(self, project: str) -> bloom.BloomFilter:
        f = self._filters.get(project)
        if f is None:
            f = self._filters[project] = bloom.BloomFilter(self.engine.conn, self.engine.keys(project))
        return f

    def target_queue(self, project: str, shard: str) -> tuple[str | None, str]:
        """(queue key, owning downloader or '') for SHARD's new items; (None, '') is todo:backfeed."""
        if not shard:
            return None, ""
        cached = self._shard_maps.get(project)
        if cached is None or cached[0] < time.monotonic():
            keys = self.engine.keys(project)
            flat = self.engine.conn.execute_command("HGETALL", keys.backfeed_shard_map)
            mapping = {}
            for name, queue in zip(flat[::2], flat[1::2]):
                try:
                    owner = queue[len("downloader:"):] if queue.startswith("downloader:") else ""
                    mapping[name] = (keys.queue(queue), owner)
                except ValueError:
                    continue   # a mapping to a queue that doesn't parse is ignored, not fatal
            if len(self._shard_maps) > 10000:
                self._shard_maps.clear()
            cached = self._shard_maps[project] = (time.monotonic() + SHARD_MAP_TTL_S, mapping)
        return cached[1].get(shard, (None, ""))

    def submit(self, project: str, secret: str, entries: list, dedup_keys: list,
               shard: str = "") -> Outcome:
        """Dedup and queue ENTRIES in batches; the secret is checked inside every script call.

        Each batch is split by the project's limits (classifying the dedup keys): free items go
        to the target queue, limited ones to the way-in set of held items, which hold_new then
        files in their limits' sub-queues. Items for a downloader's own queue are never held.
        """
        f = self.filter(project)
        digest = backfeed_secrets.digest(secret)
        outcome = Outcome(bloom.OK, len(entries))
        target, owner = self.target_queue(project, shard)
        if not entries:
            # Nothing to queue, but a wrong secret must still be told apart: one empty call.
            result = f.add([], [], secret_digest=digest, shard="",
                           fields=("backfeed_new", "backfeed_seen"))
            outcome.status = result.status
            return outcome
        # The engine's compiled limits: reloaded when the settings age moves, which its
        # settings cache notices within a second even in a process that only takes backfeed.
        compiled = None if owner else self.engine.limits(project)
        if compiled is not None and not compiled.limits:
            compiled = None
        k = self.engine.keys(project)
        held = 0
        try:
            for start in range(0, len(entries), self.batch):
                part = entries[start:start + self.batch]
                part_keys = dedup_keys[start:start + self.batch]
                groups = [(part, part_keys, target)]
                if compiled is not None:
                    names = [key.decode("utf-8", "surrogateescape") if isinstance(key, bytes)
                             else key for key in part_keys]
                    groups = limits_mod.split_entries(part, part_keys, compiled.names_of(names),
                                                      target, k)
                for group, group_keys, group_target in groups:
                    result = f.add(group, group_keys, target=group_target, owner=owner,
                                   secret_digest=digest, shard=shard,
                                   fields=("backfeed_new", "backfeed_seen"))
                    if result.status != bloom.OK:
                        outcome.status = result.status
                        return outcome
                    outcome.new += result.new
                    outcome.seen += result.seen
                    if group_target == k.limited_in:
                        held += result.new
        finally:
            if held:
                limits_mod.hold_new(self.engine.conn, k)
        return outcome
