"""Where every item of a project is (`tracker status`): tracker_core.figures.census's full count."""

from __future__ import annotations

from tracker_core.admin.context import AdminContext
from tracker_core.figures import census
from tracker_core.project import settings_schema
from tracker_core.project.shard_layout import summed


def status(ctx: AdminContext, project: str) -> dict:
    """Every queue (each downloader's own included), out, dead, offloaded, done and the counters,
    and "offload_warning": why the stored offload settings could strand items, or None."""
    k = ctx.keys(project)
    run = census.redis_py_runner(ctx.conn)
    counts = summed([census.project_status(run, shard) for shard in ctx.layout(project).keys])
    stored = settings_schema.read_offload(ctx.conn, k.settings)
    return {**counts, "offload_warning": settings_schema.offload_rules(stored).problem}
