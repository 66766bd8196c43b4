"""The audit log: every admin change, who made it (token id) and with what, in capped streams.

Each change goes to the global stream and, for a project's change, to the project's own stream,
so a project admin reads their project's history without seeing the others'.
"""
from __future__ import annotations

import json

from tracker_core import keys as keyspace

GLOBAL_MAXLEN = 100_000
PROJECT_MAXLEN = 10_000
MAX_PAGE = 1000


def record(r, actor: str, action: str, project: str | None = None, **detail) -> None:
    """Append one entry; DETAIL is stored as JSON (keep it small: counts, not item lists)."""
    fields = {"actor": actor, "action": action, "project": project or "",
              "detail": json.dumps(detail, sort_keys=True, default=str)}
    pipe = r.pipeline(transaction=False)
    pipe.xadd(keyspace.AUDIT, fields, maxlen=GLOBAL_MAXLEN, approximate=True)
    if project:
        pipe.xadd(keyspace.ProjectKeys(project).audit, fields, maxlen=PROJECT_MAXLEN,
                  approximate=True)
    pipe.execute()


def read(r, project: str | None = None, count: int = 100, before: str | None = None) -> dict:
    """A page of entries, newest first; pass the returned ``next`` as BEFORE for the next page."""
    key = keyspace.ProjectKeys(project).audit if project else keyspace.AUDIT
    count = max(1, min(count, MAX_PAGE))
    top = f"({before}" if before else "+"
    entries = r.xrevrange(key, max=top, min="-", count=count)
    rows = [{"id": entry_id, "actor": f.get("actor"), "action": f.get("action"),
             "project": f.get("project") or None, "detail": json.loads(f.get("detail") or "{}")}
            for entry_id, f in entries]
    return {"entries": rows, "next": rows[-1]["id"] if len(rows) == count else None}
