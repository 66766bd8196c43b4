"""Backfeed on the hot path: split a posted body into items and dedup them through the filter.

Items discovered by workers arrive as one body joined by a delimiter; each is queued to
``todo:backfeed`` (or the queue its shard is mapped to) only if the project's Bloom filter has
never seen its dedup key, the part before the first ``itemseparator`` when one is given.
Like every way in, backfeed passes tracker_core.items.intake: an item whose dedup key matches a pattern
or item-type limit is held in the limit's sub-queue instead (unless its shard maps to one
downloader's own queue), through the same Bloom filter call, so it is deduplicated exactly like
the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tracker_core.access import backfeed_secrets
from tracker_core.compiled import protocol
from tracker_core.items import bloom, intake, shard_router
from tracker_core.project import pattern_limits

SHARD_MAP_TTL_S = 1.0  # an admin's new shard mapping reaches every process within a second

MAX_ITEMS_PER_POST = 10_000
MAX_ITEM_BYTES = protocol.MAX_ITEM_CHARS  # bytes >= characters: every entry can be done


class BadBatch(ValueError):
    """The post can't be taken as items (too many entries); the message is one line."""


# Reasons an entry is refused on its own (the rest of its post is taken), with the stats field
# that counts the entries refused for it. An empty entry is one between two delimiters (or
# before the first); the empty end after a trailing delimiter is no entry, as clients end
# every item with the delimiter.
EMPTY, TOO_LONG = "empty", f"longer than {MAX_ITEM_BYTES} bytes"
NOT_UTF8, HAS_NUL = "not valid UTF-8", "contains NUL"
EMPTY_KEY = "empty dedup key"
REFUSED_FIELDS = {
    EMPTY: "backfeed_refused_empty",
    TOO_LONG: "backfeed_refused_too_long",
    HAS_NUL: "backfeed_refused_nul",
    NOT_UTF8: "backfeed_refused_not_utf8",
    EMPTY_KEY: "backfeed_refused_empty_key",
}


def refusal(entry: bytes) -> str | None:
    """Why ENTRY cannot be an item, or None.

    Empty: nothing to archive. Too long: it could be claimed but /done could never report it.
    A warrior gets names as JSON text (UTF-8) and a multi claim joins them with NUL, so a name
    that is not UTF-8 or holds NUL would strand the batch it is claimed in.
    """
    if not entry:
        return EMPTY
    if len(entry) > MAX_ITEM_BYTES:
        return TOO_LONG
    if b"\0" in entry:
        return HAS_NUL
    try:
        entry.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8
    return None


def parse_body(body: bytes, delimiter: bytes, separator: bytes | None) -> tuple[list, list, dict]:
    """Split BODY into entries; return (entries, dedup keys, {reason: entries refused}).

    One bad entry never refuses the post: it is left out and counted by reason. Only the
    whole-post bound (MAX_ITEMS_PER_POST entries, refused ones included, as each costs work)
    raises BadBatch, before anything is split. With SEPARATOR, an entry whose dedup key (the
    part before the separator) is empty is refused too: every such entry would share one key,
    and all but the first would be dropped as seen.
    """
    # Each delimiter ends at most one entry: counted at C speed before a list is built.
    if body.count(delimiter) > MAX_ITEMS_PER_POST:
        raise BadBatch(f"too many items: at most {MAX_ITEMS_PER_POST} per post")
    entries = body.split(delimiter)
    if not entries[-1]:
        entries.pop()  # the end after a trailing delimiter (or an empty body)
    if len(entries) > MAX_ITEMS_PER_POST:
        raise BadBatch(f"too many items: at most {MAX_ITEMS_PER_POST} per post")
    # Fast path: no empty or long entry, and a valid UTF-8 body split by NUL, which leaves
    # only valid entries without NUL (UTF-8 is self-synchronising: a NUL byte is always a
    # character of its own).
    clean = (
        entries
        and b"" not in entries
        and max(map(len, entries)) <= MAX_ITEM_BYTES
        and delimiter == b"\0"
        and _is_utf8(body)
    )
    refused: dict = {}
    if not clean:
        kept = []
        for entry in entries:
            reason = refusal(entry)
            if reason is None:
                kept.append(entry)
            else:
                refused[reason] = refused.get(reason, 0) + 1
        entries = kept
    if separator is None:
        return entries, entries, _in_order(refused)
    keys = [e.split(separator, 1)[0] for e in entries]
    if b"" in keys:
        pairs = [(e, key) for e, key in zip(entries, keys) if key]
        refused[EMPTY_KEY] = len(entries) - len(pairs)
        entries, keys = [e for e, _ in pairs], [key for _, key in pairs]
    return entries, keys, _in_order(refused)


def _in_order(refused: dict) -> dict:
    """REFUSED in the order of REFUSED_FIELDS, so an answer reads the same for the same post."""
    return {reason: refused[reason] for reason in REFUSED_FIELDS if refused.get(reason)}


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def split_body(body: bytes, delimiter: bytes, separator: bytes | None) -> tuple[list, list]:
    """(entries, dedup keys) of BODY, refused entries left out (see parse_body)."""
    entries, keys, _ = parse_body(body, delimiter, separator)
    return entries, keys


def queue_bound(settings) -> int:
    """Most items backfeed's queue plus the held items may hold for PROJECT (0: no bound).

    Only while offloading is off: with offloading on, `tracker maintain` moves queue tails past
    offload_high to disk, which bounds Redis instead.
    """
    values = settings.values
    if int(values.get("offload_high") or 0) > 0:
        return 0
    return int(values.get("backfeed_max_items") or 0)


@dataclass
class Outcome:
    status: int  # bloom.OK, UNKNOWN_PROJECT, WRONG_SECRET or FULL
    received: int = 0
    new: int = 0
    seen: int = 0
    bound: int = 0  # the bound in force (what FULL was measured against)


class Backfeed:
    """The backfeed path of one process, over the engine's raw connection."""

    def __init__(self, engine, batch: int = bloom.BATCH):
        self.engine = engine
        self.batch = batch
        self._filters: dict[str, bloom.BloomFilter] = {}
        self._shard_maps: dict[str, tuple[float, dict]] = {}

    def filter(self, project: str, k=None) -> bloom.BloomFilter:
        """The Bloom filter of PROJECT, or of its shard whose keys are K."""
        k = self.engine.keys(project) if k is None else k
        f = self._filters.get(k.tag)
        if f is None:
            if len(self._filters) > 10000:
                self._filters.clear()
            f = self._filters[k.tag] = bloom.BloomFilter(self.engine.conn, k)
        return f

    def target_queue(self, project: str, shard: str, k=None) -> tuple[str | None, str]:
        """(queue key, owning downloader or '') for SHARD's new items; (None, '') is todo:backfeed.
        K: the keys of the project shard the items go to (by default its first). The map
        (set by admins, on the first shard) names queues, which each project shard has."""
        if not shard:
            return None, ""
        cached = self._shard_maps.get(project)
        if cached is None or cached[0] < time.monotonic():
            keys = self.engine.keys(project)
            flat = self.engine.conn.execute_command("HGETALL", keys.backfeed_shard_map)
            mapping = {}
            for name, queue in zip(flat[::2], flat[1::2]):
                try:
                    keys.queue_and_owner(queue)
                except ValueError:
                    continue  # a mapping to a queue that doesn't parse is ignored, not fatal
                mapping[name] = queue
            if len(self._shard_maps) > 10000:
                self._shard_maps.clear()
            cached = self._shard_maps[project] = (time.monotonic() + SHARD_MAP_TTL_S, mapping)
        queue = cached[1].get(shard)
        if queue is None:
            return None, ""
        return (self.engine.keys(project) if k is None else k).queue_and_owner(queue)

    def count_refused(self, project: str, refused: dict) -> None:
        """Count entries refused one by one (per reason) in the project's stats."""
        stats = self.engine.keys(project).stats
        for reason, n in refused.items():
            if not n:
                continue
            self.engine.conn.execute_command("HINCRBY", stats, REFUSED_FIELDS[reason], n)

    def submit(self, project: str, secret: str, entries: list, dedup_keys: list, shard: str = "") -> Outcome:
        """Dedup and queue ENTRIES in batches; the secret is checked inside every script call.

        Each batch is split by the project's limits (classifying the dedup keys): free items go
        to the target queue, limited ones to the way-in set of held items, which hold_new then
        files in their limits' sub-queues. Items for a downloader's own queue are never held.
        A batch whose new items would take the queue past the project's bound (queue_bound) is
        not queued and the outcome is FULL; batches before it stay queued, and a retry of the
        whole post finds them seen.
        """
        digest = backfeed_secrets.digest(secret)
        outcome = Outcome(bloom.OK, len(entries))
        settings = self.engine.settings(project)
        bound = outcome.bound = queue_bound(settings) if settings is not None else 0
        layout = self.engine.layout(project)
        if not layout.sharded:
            self._submit_on(
                project, self.engine.keys(project), digest, entries, dedup_keys, shard, bound, outcome
            )
            return outcome
        # One call per project shard (the dedup key is the name: no itemseparator here, see
        # tracker_api.warrior_api.backfeed_route), each queue bounded by its share of the bound.
        share = -(-bound // layout.count) if bound else 0
        earlier = shard_router.seen_on_earlier_shards(self.engine.conn, layout, entries)
        if earlier:  # a project that gained shards: seen where these names were added before
            entries = [name for name in entries if name not in earlier]
            outcome.seen += len(earlier)
        for index, names in (layout.split(entries) or {0: []}).items():
            self._submit_on(project, layout.keys[index], digest, names, names, shard, share, outcome)
            if outcome.status != bloom.OK:
                break
        return outcome

    def _submit_on(self, project, k, digest, entries, dedup_keys, shard, bound, outcome) -> None:
        """submit() on one project shard (keys K), adding to OUTCOME."""
        f = self.filter(project, k)
        target, owner = self.target_queue(project, shard, k)
        if not entries:
            # Nothing to queue, but a wrong secret must still be told apart: one empty call.
            empty = f.add([], [], secret_digest=digest, shard="", fields=("backfeed_new", "backfeed_seen"))
            outcome.status = empty.status
            return
        # The engine's compiled limits: reloaded when the settings age moves, which its
        # settings cache notices within a second even in a process that only takes backfeed.
        compiled = None if owner else self.engine.limits(project)
        held = 0
        try:
            for start in range(0, len(entries), self.batch):
                result = intake.enqueue(
                    f,
                    k,
                    entries[start : start + self.batch],
                    dedup_keys[start : start + self.batch],
                    target,
                    owner,
                    compiled,
                    secret_digest=digest,
                    shard=shard,
                    fields=("backfeed_new", "backfeed_seen"),
                    bound=bound,
                )
                outcome.new += result.new
                outcome.seen += result.seen
                held += result.held
                if result.status != bloom.OK:
                    outcome.status = result.status
                    return
        finally:
            if held:
                pattern_limits.hold_new(self.engine.conn, k)
