"""Where every item of a project is (`tracker status`): tracker_core.census's full count."""

from __future__ import annotations

from tracker_core import census as census_mod
from tracker_core import settings as settings_mod
from tracker_core.admin.context import AdminContext
from tracker_core.shard_layout import summed


def status(ctx: AdminContext, project: str) -> dict:
    """Every queue (each downloader's own included), out, dead, offloaded, done and the counters,
    and "offload_warning": why the stored offload settings could strand items, or None."""
    k = ctx.keys(project)
    run = census_mod.redis_py_runner(ctx.conn)
    counts = summed([census_mod.project_status(run, shard) for shard in ctx.layout(project).keys])
    stored = settings_mod.read_offload(ctx.conn, k.settings)
    return {**counts, "offload_warning": settings_mod.offload_rules(stored).problem}
