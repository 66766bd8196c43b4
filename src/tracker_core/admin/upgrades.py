"""What `tracker maintain` clears once at its start from data an older tracker wrote.

`{P}:reclaim_at` indexed claims by when they may be reclaimed. `out` is scored by that time now
(docs/data-model.md), so nothing reads the index; it held an entry for every item claimed since
the project's queues last ran dry (a done left its entry behind), which can be most of a large
project's memory. Claims an older tracker node wrote stay reclaimable without it: their record
of three fields tells the claim script that their `out` score is the claim time.
"""

from __future__ import annotations

from tracker_core import keys as keyspace
from tracker_core.admin.context import AdminContext


def drop_reclaim_index(ctx: AdminContext) -> dict:
    """UNLINK every project's `reclaim_at` (freed in the background); how many there were."""
    names = sorted(ctx.conn.smembers(keyspace.PROJECTS))
    found = [keyspace.ProjectKeys(name).reclaim_at for name in names]
    return {"dropped": int(ctx.conn.unlink(*found)) if found else 0}
