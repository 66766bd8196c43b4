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


# Reasons an entry is refused on its own (the rest of its post is taken), with the stats field
# that counts the entries refused for it.
NOT_UTF8, HAS_NUL = "not valid UTF-8", "contains NUL"
REFUSED_FIELDS = {NOT_UTF8: "backfeed_refused_not_utf8", HAS_NUL: "backfeed_refused_nul"}


def refusal(entry: bytes) -> str | None:
    """Why ENTRY cannot be an item, or None: a warrior gets names as JSON text (UTF-8) and a
    multi claim joins them with NUL, so either would strand the batch it is claimed in."""
    if b"\0" in entry:
        return HAS_NUL
    try:
        entry.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8
    return None


def drop_refused(body: bytes, delimiter: bytes, entries: list, dedup_keys: list
                 ) -> tuple[list, list, dict]:
    """Keep the entries that can be items; return (entries, dedup keys, {reason: count}).

    Fast path: a body that is valid UTF-8 split by a delimiter that is valid UTF-8 yields only
    valid entries (UTF-8 is self-synchronising: such a delimiter matches only between
    characters), and a NUL delimiter leaves no NUL in any entry.
    """
    if delimiter == b"\0":
        try:
            body.decode("utf-8")
            return entries, dedup_keys, {}
        except UnicodeDecodeError:
            pass
    kept, kept_keys, refused = [], [], {}
    for entry, key in zip(entries, dedup_keys):
        reason = refusal(entry)
        if reason is None:
            kept.append(entry)
            kept_keys.append(key)
        else:
            refused[reason] = refused.get(reason, 0) + 1
    return kept, kept_keys, refused


def queue_bound(settings) -> int:
    """Most items backfeed's queue plus the held items may hold for PROJECT (0: no bound).

    Only while offloading is off: with offloading on, `tracker maintain` moves queue tails past
    offload_high to disk, which bounds Redis instead.
    """
    values = settings.values
    if int(values.get("offload_high") or 0) > 0:
        return 0
    return int(values.get("backfeed_max_items") or 0)


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
    status: int          # bloom.OK, UNKNOWN_PROJECT, WRONG_SECRET or FULL
    received: int = 0
    new: int = 0
    seen: int = 0
    bound: int = 0       # the bound in force (what FULL was measured against)


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

    def count_refused(self, project: str, refused: dict) -> None:
        """Count entries refused one by one (per reason) in the project's stats."""
        stats = self.engine.keys(project).stats
        for reason, n in refused.items():
            self.engine.conn.execute_command("HINCRBY", stats, REFUSED_FIELDS[reason], n)

    def submit(self, project: str, secret: str, entries: list, dedup_keys: list,
               shard: str = "") -> Outcome:
        """Dedup and queue ENTRIES in batches; the secret is checked inside every script call.

        Each batch is split by the project's limits (classifying the dedup keys): free items go
        to the target queue, limited ones to the way-in set of held items, which hold_new then
        files in their limits' sub-queues. Items for a downloader's own queue are never held.
        A batch whose new items would take the queue past the project's bound (queue_bound) is
        not queued and the outcome is FULL; batches before it stay queued, and a retry of the
        whole post finds them seen.
        """
        f = self.filter(project)
        digest = backfeed_secrets.digest(secret)
        outcome = Outcome(bloom.OK, len(entries))
        settings = self.engine.settings(project)
        bound = outcome.bound = queue_bound(settings) if settings is not None else 0
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
                    # The bound counts the same three places for both halves of a batch: the
                    # target queue, the held items and their way-in set.
                    counted = (target or k.backfeed) if group_target == k.limited_in else None
                    result = f.add(group, group_keys, target=group_target, owner=owner,
                                   secret_digest=digest, shard=shard,
                                   fields=("backfeed_new", "backfeed_seen"), bound=bound,
                                   counted=counted)
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
