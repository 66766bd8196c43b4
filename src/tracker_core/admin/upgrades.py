"""What `tracker maintain` clears once at its start from data an older tracker wrote.

`{P}:reclaim_at` indexed claims by when they may be reclaimed. `out` is scored by that time now
(docs/data-model.md), so nothing reads the index; it held an entry for every item claimed since
the project's queues last ran dry (a done left its entry behind), which can be most of a large
project's memory. Claims an older tracker node wrote stay reclaimable without it: their record
of three fields tells the claim script that their `out` score is the claim time.

`{P}:settings` and `{P}:stats` of a project created by an older tracker are listpacks, which
every claim and done search field by field; pad_hashes writes the fields that make them
hashtables (script_constants.SETTINGS_PAD_FIELD, STATS_PAD_FIELD), once, for each project still
without them.
"""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.admin.context import AdminContext


def drop_reclaim_index(ctx: AdminContext) -> dict:
    """UNLINK every project's `reclaim_at` (freed in the background); how many there were."""
    names = sorted(ctx.conn.smembers(keyspace.PROJECTS))
    found = [keyspace.ProjectKeys(name).reclaim_at for name in names]
    return {"dropped": int(ctx.conn.unlink(*found)) if found else 0}


def pad_hashes(ctx: AdminContext) -> dict:
    """Give every project whose settings or stats hash is still a listpack the fields that make
    both hashtables (pad_hashes-2.lua, which writes nothing for a project deleted meanwhile);
    how many projects it padded."""
    padded = 0
    for name in sorted(ctx.conn.smembers(keyspace.PROJECTS)):
        k = keyspace.ProjectKeys(name)
        encodings = {ctx.conn.object("encoding", key) for key in (k.settings, k.stats)}
        if "listpack" not in encodings and None not in encodings:
            continue
        if scripts.pad_hashes(ctx.conn, k) == scripts.pad_hashes.codes.PADDED:
            padded += 1
    return {"padded": padded}
