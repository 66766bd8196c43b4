"""The audit log: every admin change, who made it (token id) and with what, in capped streams.

Each change goes to the global stream and, for a project's change, to the project's own stream,
so a project admin reads their project's history without seeing the others'.
"""

from __future__ import annotations

import json
import re

from tracker_core import keyspace

GLOBAL_MAXLEN = 100_000
PROJECT_MAXLEN = 10_000
MAX_PAGE = 1000
STREAM_ID_RE = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?\Z")
CLI_ACTOR = "cli"  # the actor of changes made with the `tracker` command


def check_before(before: str | None) -> str | None:
    """BEFORE as a stream entry id (MS or MS-SEQ, each below 2**64); ValueError otherwise."""
    if before is None or before == "":
        return None
    match = STREAM_ID_RE.match(before) if isinstance(before, str) else None
    if not match or any(int(part) >= 2**64 for part in match.groups() if part is not None):
        raise ValueError(f"bad 'before' {str(before)[:40]!r}: use the 'next' of the previous page")
    return before


def record(r, actor: str, action: str, project: str | None = None, **detail) -> None:
    """Append one entry; DETAIL is stored as JSON (keep it small: counts, not item lists)."""
    fields = {
        "actor": actor,
        "action": action,
        "project": project or "",
        "detail": json.dumps(detail, sort_keys=True, default=str),
    }
    pipe = r.pipeline(transaction=False)
    pipe.xadd(keyspace.AUDIT, fields, maxlen=GLOBAL_MAXLEN, approximate=True)
    if project:
        pipe.xadd(keyspace.ProjectKeys(project).audit, fields, maxlen=PROJECT_MAXLEN, approximate=True)
    pipe.execute()


def read(r, project: str | None = None, count: int = 100, before: str | None = None) -> dict:
    """A page of entries, newest first; pass the returned ``next`` as BEFORE for the next page."""
    key = keyspace.ProjectKeys(project).audit if project else keyspace.AUDIT
    if type(count) is not int:
        raise ValueError(f"'count' must be an integer from 1 to {MAX_PAGE}")
    count = max(1, min(count, MAX_PAGE))
    before = check_before(before)
    if before is not None and not int(before.replace("-", "")):
        return {"entries": [], "next": None}  # nothing comes before 0-0
    top = f"({before}" if before else "+"
    entries = r.xrevrange(key, max=top, min="-", count=count)
    rows = [
        {
            "id": entry_id,
            "actor": f.get("actor"),
            "action": f.get("action"),
            "project": f.get("project") or None,
            "detail": json.loads(f.get("detail") or "{}"),
        }
        for entry_id, f in entries
    ]
    return {"entries": rows, "next": rows[-1]["id"] if len(rows) == count else None}
