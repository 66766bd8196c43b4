"""Offloaded segments of a project: list them (tracker_core.figures.census), export one, import a file
(tracker_core.offload's public functions: the files live where `tracker maintain` keeps them).

A one-shard project numbers its segments 1, 2, ...; each shard of a sharded project numbers its
own, so a segment of a sharded project is named "SHARD:NUMBER" (docs/sharding.md), in the listing
and when exported. An import into a sharded project splits the file's items by shard.
"""

from __future__ import annotations

import re
from pathlib import Path

from tracker_core.admin import segment_transfer
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.figures import census
from tracker_core.offload import segment_registry
from tracker_core.offload.segment_file import shard_directory
from tracker_core.project.shard_layout import ShardLayout

SEGMENT_REF_RE = re.compile(r"([0-9]{1,2}):([1-9][0-9]{0,17})\Z")
NUMBER_RE = re.compile(r"[1-9][0-9]{0,17}\Z")


def segment_ref(layout: ShardLayout, ref) -> tuple[int, int]:
    """(shard index, segment number) of REF: a number (an int or digits) on a one-shard
    project, "SHARD:NUMBER" on a sharded one (the names `list_segments` gives). BadInput else."""
    if not layout.sharded:
        if type(ref) is int and ref >= 1:
            return 0, ref
        if isinstance(ref, str) and NUMBER_RE.match(ref):
            return 0, int(ref)
        raise BadInput("'number' must be a segment number (1 or more)")
    match = SEGMENT_REF_RE.match(ref) if isinstance(ref, str) else None
    if match is None or int(match[1]) >= len(layout.keys):
        raise BadInput(
            f"{layout.project!r} is sharded: name a segment SHARD:NUMBER with SHARD below "
            f"{len(layout.keys)}, as `segments list` shows"
        )
    return int(match[1]), int(match[2])


def list_segments(ctx: AdminContext, project: str) -> dict:
    """Registered segments (number -> items and the queue, or done, they came from) and the
    items on their way to one; over every shard of a sharded project ("SHARD:NUMBER" names)."""
    layout = ctx.layout(project)
    run = census.redis_py_runner(ctx.conn)
    if not layout.sharded:
        return census.segment_listing(run, layout.keys[0])
    listing: dict = {"segments": {}, "offloading": 0}
    for index, k in enumerate(layout.keys):
        part = census.segment_listing(run, k)
        listing["segments"].update({f"{index}:{n}": row for n, row in part["segments"].items()})
        listing["offloading"] += part["offloading"]
    return listing


def export_file(ctx: AdminContext, project: str, directory: Path, number, destination: Path) -> dict:
    """Move segment NUMBER ("SHARD:NUMBER" on a sharded project) out of PROJECT into DESTINATION
    (its items leave the project, counted)."""
    layout = ctx.layout(project)
    index, n = segment_ref(layout, number)
    k = layout.keys[index]
    if n not in segment_registry.registry(ctx.conn, k):
        raise NotFound(f"no segment {number} in {project}")
    where = shard_directory(Path(directory), project, index)
    try:
        items = segment_transfer.export_segment(ctx.conn, k, where, n, Path(destination))
    except segment_registry.OffloadError as exc:
        raise BadInput(str(exc).replace(f"segment {n}", f"segment {number}")) from None
    ctx.audit("segments.export", project, segment=number, items=items, destination=str(destination))
    return {"segment": number, "items": items, "destination": str(destination)}


def import_file(ctx: AdminContext, project: str, directory: Path, source: Path, queue: str = "todo") -> dict:
    """Bring a segment file into PROJECT: back as a segment when exported from it (once; on the
    shard it left), else its items through the project's intake into QUEUE, each on its own
    shard (seen ones dropped as duplicates)."""
    layout = ctx.layout(project)
    if queue not in segment_registry.QUEUES:  # the queues offloading serves; never a downloader's own
        raise BadInput(f"import into todo, backfeed, secondary or redo, not {str(queue)[:80]!r}")
    try:
        result = segment_transfer.import_segment(
            ctx.conn, layout.keys[0], Path(directory), Path(source), queue, layout
        )
    except segment_registry.OffloadError as exc:
        raise BadInput(str(exc)) from None
    ctx.audit("segments.import", project, source=str(source), queue=queue, **result)
    return result
