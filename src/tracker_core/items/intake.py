"""The one way new items come in: classify, split, Bloom filter, enqueue, hold.

`tracker items add` (and the admin API and pages), backfeed and the import of a segment file
that was not exported from the project all pass here, so every new item is deduplicated by the
project's Bloom filter (a name seen before, queued, claimed or done, is counted and dropped)
and an item a pattern or item-type limit matches is held in the limit's sub-queue, classified
once on its way in. Items for one downloader's own queue are never held.

Give-backs of items the project already had (release, dead requeue, queue moves, redo) do not
pass the filter: they are tracker_core.items.giveback's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tracker_core import keyspace
from tracker_core.errors import BadInput, NotFound
from tracker_core.items import bloom, shard_router
from tracker_core.project import pattern_limits
from tracker_core.project.shard_layout import ShardLayout

ADD_BATCH = 5000  # names read per step of add(): one progress report, one count of refusals
NOT_UTF8 = "not_utf8"  # a name refused on its own; counted in stats as items_refused_not_utf8


def valid_utf8(name: str) -> bool:
    """Whether NAME (read with surrogateescape) was valid UTF-8: an undecodable byte became a
    lone surrogate. A warrior gets names as JSON text, so such a name could be claimed but
    never answered, and its whole multi claim would be stranded."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class Batch:
    """What one enqueue() did: the filter's status, and new (held included) and seen items."""

    status: int = bloom.OK
    new: int = 0
    seen: int = 0
    held: int = 0  # new items that went to the held items' way-in set: hold_new files them


def enqueue(
    seen_filter: bloom.BloomFilter,
    k: keyspace.ProjectKeys,
    entries: list,
    dedup_keys: list,
    target: str | None,
    owner: str,
    compiled: pattern_limits.CompiledLimits | None,
    **filter_args,
) -> Batch:
    """Queue one batch (at most a few hundred entries: one script call blocks Redis) to TARGET
    (None: todo:backfeed) through the filter, limited ones to the way-in set.

    The dedup keys are classified, so copies of one key land in the same group and the filter
    still dedups them within the batch. FILTER_ARGS go to BloomFilter.add (secret, shard,
    counter fields, bound); with a bound, both groups count the same places: the target queue,
    the held items and their way-in set. Stops at the first group the filter refuses.
    """
    groups = [(entries, dedup_keys, target)]
    if compiled is not None and compiled.limits and not owner:
        names = [
            key.decode("utf-8", "surrogateescape") if isinstance(key, bytes) else key for key in dedup_keys
        ]
        groups = pattern_limits.split_entries(entries, dedup_keys, compiled.names_of(names), target, k)
    batch = Batch()
    for group, group_keys, group_target in groups:
        counted = (target or k.backfeed) if group_target == k.limited_in else None
        result = seen_filter.add(
            group, group_keys, target=group_target, owner=owner, counted=counted, **filter_args
        )
        # Counted before the status: a refused batch may have queued a first part (bloom.SPLIT),
        # and held items must reach hold_new.
        batch.new += result.new
        batch.seen += result.seen
        if group_target == k.limited_in:
            batch.held += result.new
        if result.status != bloom.OK:
            batch.status = result.status
            return batch
    return batch


def add(
    conn,
    k: keyspace.ProjectKeys,
    names: Iterable[str],
    queue: str = "todo",
    batch: int = ADD_BATCH,
    refused: dict | None = None,
    layout: ShardLayout | None = None,
) -> Iterator[tuple[int, int]]:
    """Queue NAMES into QUEUE of K's project a batch at a time; yield (added, duplicates) per
    batch so callers show progress. With LAYOUT (a sharded project: K is its first shard) each
    name goes to its own shard's queue, through that shard's Bloom filter partition.

    Empty names are skipped. A name that was not valid UTF-8 is refused on its own (the rest of
    its batch is added), counted in the project's stats (items_refused_not_utf8) and in
    REFUSED[NOT_UTF8]. CONN is a redis-py client (str replies). BadInput for a queue name that
    does not parse; NotFound when the project is gone.
    """
    if layout is None or not layout.sharded:
        layout = ShardLayout(k.project, (k.tag,))
    shards = layout.keys
    try:
        targets = [shard.queue_and_owner(queue) for shard in shards]
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    owner = targets[0][1]
    filters = [bloom.BloomFilter(conn, shard) for shard in shards]
    compiled = None if owner else pattern_limits.CompiledLimits(pattern_limits.load(conn, k))
    refused = {} if refused is None else refused
    bad = 0

    def add_chunk(chunk: list[str]) -> tuple[int, int]:
        added = duplicates = 0
        held_on = set()
        earlier = shard_router.seen_on_earlier_shards(conn, layout, chunk)
        if earlier:  # a project that gained shards: seen where these names were added before
            chunk = [name for name in chunk if name not in earlier]
            duplicates += len(earlier)
        try:
            for index, names_here in layout.split(chunk).items():
                shard, (target, _) = shards[index], targets[index]
                for start in range(0, len(names_here), bloom.BATCH):
                    part = names_here[start : start + bloom.BATCH]
                    result = enqueue(filters[index], shard, part, part, target, owner, compiled)
                    added, duplicates = added + result.new, duplicates + result.seen
                    if result.held:
                        held_on.add(index)
                    if result.status == bloom.UNKNOWN_PROJECT:
                        raise NotFound(f"unknown project {k.project!r}")
        finally:
            for index in held_on:
                pattern_limits.hold_new(conn, shards[index])
        return added, duplicates

    def count_refused() -> None:  # once per batch, not once per name
        nonlocal bad
        if bad:
            conn.hincrby(k.stats, "items_refused_not_utf8", bad)
            refused[NOT_UTF8] = refused.get(NOT_UTF8, 0) + bad
            bad = 0

    chunk: list[str] = []
    for name in names:
        if not name:
            continue
        if not valid_utf8(name):
            bad += 1
            continue
        chunk.append(name)
        if len(chunk) >= batch:
            count_refused()
            yield add_chunk(chunk)
            chunk = []
    count_refused()
    if chunk:
        yield add_chunk(chunk)


def add_names(
    conn,
    k: keyspace.ProjectKeys,
    names: Iterable[str],
    queue: str = "todo",
    progress: Callable[[int, int], None] | None = None,
    layout: ShardLayout | None = None,
) -> dict:
    """Queue NAMES into QUEUE (see add): {"added", "duplicates"}, plus "refused_not_utf8" when
    names were refused for not being UTF-8. PROGRESS(added, duplicates) runs after each batch;
    LAYOUT as for add.
    What segment import and the admin verbs call for a whole list of names."""
    added = duplicates = 0
    refused: dict = {}
    for new, seen in add(conn, k, names, queue, refused=refused, layout=layout):
        added, duplicates = added + new, duplicates + seen
        if progress is not None:
            progress(added, duplicates)
    answer = {"added": added, "duplicates": duplicates}
    if refused:
        answer["refused_not_utf8"] = refused[NOT_UTF8]
    return answer
