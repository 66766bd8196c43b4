"""What `tracker maintain` clears once at its start from data an older tracker wrote.

`{P}:reclaim_at` indexed claims by when they may be reclaimed. `out` is scored by that time now
(docs/data-model.md), so nothing reads the index; it held an entry for every item claimed since
the project's queues last ran dry (a done left its entry behind), which can be most of a large
project's memory. Claims an older tracker node wrote stay reclaimable without it: their record
of three fields tells the claim script that their `out` score is the claim time.

`{P}:settings` of a project created by an older tracker is a listpack, which every claim and
done searches field by field; set_settings writes the field that makes it a hashtable
(script_constants.SETTINGS_PAD_FIELD), once, for each project still without it.
"""

from __future__ import annotations

from tracker_core import keys as keyspace
from tracker_core import script_calls
from tracker_core.admin.context import AdminContext


def drop_reclaim_index(ctx: AdminContext) -> dict:
    """UNLINK every project's `reclaim_at` (freed in the background); how many there were."""
    names = sorted(ctx.conn.smembers(keyspace.PROJECTS))
    found = [keyspace.ProjectKeys(name).reclaim_at for name in names]
    return {"dropped": int(ctx.conn.unlink(*found)) if found else 0}


def pad_settings(ctx: AdminContext) -> dict:
    """Give every project whose settings hash is still a listpack the field that makes it a
    hashtable (through set_settings, which bumps the age: every node reloads once); how many.
    A project deleted meanwhile is left alone (set_settings creates nothing)."""
    padded = 0
    for name in sorted(ctx.conn.smembers(keyspace.PROJECTS)):
        k = keyspace.ProjectKeys(name)
        if ctx.conn.object("encoding", k.settings) != "listpack":
            continue
        if script_calls.set_settings(ctx.conn, k, channel=keyspace.SETTINGS_CHANNEL, values={}) > 0:
            padded += 1
    return {"padded": padded}
