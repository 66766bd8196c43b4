"""Export and import of segment files: take a segment out of a project, bring a file in.

An export leaves a ticket (the digest of its items, in `{P}:segment_exports`), so importing the
same file back brings its items back once, as a segment of the queue they left. Any other file
goes through the project's intake (classify, Bloom filter, enqueue, hold), like `items add`.

On a sharded project (docs/sharding.md) each shard keeps its own segments, tickets and folder:
an exported file comes back to the shard that holds its ticket, and any other file's items go
each to its own shard through the intake.
"""

from __future__ import annotations

from pathlib import Path

from tracker_core import keyspace, scripts
from tracker_core.admin import checks
from tracker_core.items import intake
from tracker_core.offload.segment_file import (
    UNREADABLE,
    items_digest,
    read_segment,
    segment_path,
    shard_directory,
    write_segment,
)
from tracker_core.offload.segment_registry import NEXT_FIELD, QUEUES, OffloadError, registry
from tracker_core.project.shard_layout import ShardLayout


def export_segment(client, k: keyspace.ProjectKeys, directory: Path, number: int, destination: Path) -> int:
    """Take segment NUMBER out of the project into DESTINATION; return its item count.

    The export leaves a ticket (the digest of its items), so importing the file back brings the
    items back once, into the queue they came from.
    """
    source = segment_path(directory, k.project, number)
    if number not in registry(client, k) or not source.exists():
        raise OffloadError(f"no segment {number} in {k.project}")
    try:
        items = read_segment(source)
    except UNREADABLE as exc:
        raise OffloadError(f"cannot read segment {number}: {exc}".splitlines()[0]) from None
    destination = Path(destination)
    write_segment(destination, items)
    n = scripts.segment_export(client, k, number=number, digest=items_digest(items))
    if n < 0:  # refilled or exported meanwhile: the items are elsewhere, so no copy stays out
        destination.unlink(missing_ok=True)
        raise OffloadError(f"no segment {number} in {k.project}")
    source.unlink(missing_ok=True)
    return n


def _ticket_shard(client, layout: ShardLayout, digest: str) -> int | None:
    """The shard of LAYOUT holding an export ticket for DIGEST (one pipeline), or None."""
    pipe = client.pipeline(transaction=False)
    for shard in layout.keys:
        pipe.hexists(shard.segment_exports, digest)
    return next((index for index, held in enumerate(pipe.execute()) if held), None)


def import_segment(
    client,
    k: keyspace.ProjectKeys,
    directory: Path,
    source: Path,
    queue: str = "todo",
    layout: ShardLayout | None = None,
) -> dict:
    """Bring a segment file (as export writes it) into the project.

    A file exported from this project comes back as a segment of the queue it left, once (its
    export ticket is used up). Any other file (another project's, a second import) has its items
    added through the project's intake into QUEUE, like `tracker items add`: items the project
    has seen (queued, claimed, done, offloaded) are dropped, so nothing is duplicated.
    Returns {"segment": number or None, "items": brought in, "duplicates": dropped}, plus
    "refused_not_utf8" when names of such a file were not valid UTF-8 (refused one by one and
    counted; an exported file comes back whole, as it left). OffloadError for a file that cannot
    be read, an unknown project or queue; intake's NotFound when the project goes meanwhile.
    With LAYOUT (a sharded project; K is its first shard) the file comes back to the shard that
    holds its ticket, into that shard's folder, or its items go each to its own shard.
    """
    try:
        items = read_segment(Path(source))
    except UNREADABLE as exc:
        raise OffloadError(f"cannot read segment {source}: {exc}".splitlines()[0]) from None
    # A longer name could be claimed but never reported done (checks.item); nothing is imported.
    too_long = next((n for n, name in enumerate(items, 1) if len(name) > checks.MAX_ITEM_CHARS), None)
    if too_long is not None:
        raise OffloadError(
            f"item {too_long} of {source} is longer than {checks.MAX_ITEM_CHARS} characters: nothing imported"
        )
    if not client.exists(k.settings):
        raise OffloadError(f"unknown project {k.project!r}")
    if queue not in QUEUES:
        raise OffloadError(f"import into todo, backfeed, secondary or redo, not {queue!r}")
    if layout is None:
        layout = ShardLayout(k.project, (k.tag,))
    digest = items_digest(items)
    index = _ticket_shard(client, layout, digest) if items else None
    if index is not None:
        k, directory = layout.keys[index], shard_directory(Path(directory), k.project, index)
        number = client.hincrby(k.segments, NEXT_FIELD, 1)
        path = segment_path(directory, k.project, number)
        write_segment(path, items)
        reply = scripts.segment_import(client, k, number=number, count=len(items), digest=digest)
        if reply == scripts.segment_import.codes.IMPORTED:
            segment = f"{index}:{number}" if layout.sharded else number
            return {"segment": segment, "items": len(items), "duplicates": 0}
        path.unlink(missing_ok=True)
        if reply == scripts.segment_import.codes.UNKNOWN_PROJECT:
            raise OffloadError(f"unknown project {k.project!r}")
        # NO_TICKET (imported meanwhile) or NUMBER_TAKEN: through the filter, which drops
        # whatever the project already has.
    added = intake.add_names(client, layout.keys[0], items, queue, layout=layout)
    result = {"segment": None, "items": added["added"], "duplicates": added["duplicates"]}
    if "refused_not_utf8" in added:
        result["refused_not_utf8"] = added["refused_not_utf8"]
    return result
