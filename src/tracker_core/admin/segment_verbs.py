"""Offloaded segments of a project: list them (tracker_core.figures.census), export one, import a file
(tracker_core.offload's public functions: the files live where `tracker maintain` keeps them)."""

from __future__ import annotations

from pathlib import Path

from tracker_core.admin import segment_transfer
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.figures import census
from tracker_core.offload import segment_registry


def _one_shard(ctx: AdminContext, project: str):
    """PROJECT's keys; BadInput for a sharded project (docs/sharding.md: offloading is not
    available there, and an import would put every item on the first shard)."""
    layout = ctx.layout(project)
    if layout.sharded:
        raise BadInput(
            f"{project!r} is sharded: segment export and import are not available on a sharded project"
        )
    return layout.keys[0]


def list_segments(ctx: AdminContext, project: str) -> dict:
    """Registered segments (number -> items and the queue, or done, they came from) and the
    items on their way to one."""
    return census.segment_listing(census.redis_py_runner(ctx.conn), ctx.keys(project))


def export_file(ctx: AdminContext, project: str, directory: Path, number: int, destination: Path) -> dict:
    """Move segment NUMBER out of PROJECT into DESTINATION (its items leave the project, counted)."""
    k = _one_shard(ctx, project)
    if type(number) is not int or number < 1:
        raise BadInput("'number' must be a segment number (1 or more)")
    if number not in segment_registry.registry(ctx.conn, k):
        raise NotFound(f"no segment {number} in {project}")
    try:
        items = segment_transfer.export_segment(ctx.conn, k, Path(directory), number, Path(destination))
    except segment_registry.OffloadError as exc:
        raise BadInput(str(exc)) from None
    ctx.audit("segments.export", project, segment=number, items=items, destination=str(destination))
    return {"segment": number, "items": items, "destination": str(destination)}


def import_file(ctx: AdminContext, project: str, directory: Path, source: Path, queue: str = "todo") -> dict:
    """Bring a segment file into PROJECT: back as a segment when exported from it (once), else
    its items through the project's intake into QUEUE (seen ones dropped as duplicates)."""
    k = _one_shard(ctx, project)
    if queue not in segment_registry.QUEUES:  # the queues offloading serves; never a downloader's own
        raise BadInput(f"import into todo, backfeed, secondary or redo, not {str(queue)[:80]!r}")
    try:
        result = segment_transfer.import_segment(ctx.conn, k, Path(directory), Path(source), queue)
    except segment_registry.OffloadError as exc:
        raise BadInput(str(exc)) from None
    ctx.audit("segments.import", project, source=str(source), queue=queue, **result)
    return result
