"""Where every item of a project is (`tracker status`): tracker_core.census's full count."""

from __future__ import annotations

from tracker_core import census as census_mod
from tracker_core.admin.context import AdminContext


def status(ctx: AdminContext, project: str) -> dict:
    """Every queue (each downloader's own included), out, dead, offloaded, done and the counters."""
    return census_mod.project_status(census_mod.redis_py_runner(ctx.conn), ctx.keys(project))
