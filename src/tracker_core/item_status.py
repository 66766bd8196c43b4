"""Where an item is: every place an item can be, read in one script call (item_status-n.lua).

Anonymous clients ask (``GET /P/items/ITEM.json``), so the cost of a name found nowhere stays
bounded: exact lookups in the shared queues, in at most OWN_QUEUES_CHECKED downloaders' own
queues and under each limit; the name is never classified and segment files are never opened.
The answer keeps the old tracker's two keys (``status``, ``downloader``: the same values for
todo, out and done) and adds the rest:

- ``status``: "todo", "out", "done", "dead", "offloaded" (on its way to a segment file), or
  None (found nowhere: unknown, done and not kept, or in a segment file: see ``maybe``);
- ``downloader``: who holds it (out) or held it last (dead);
- ``queue``: the queue it waits in (todo: "todo", "backfeed", "secondary", "redo",
  "downloader:NAME", or "limited" when a limit holds it); for offloaded, the queue its segment
  comes from ("done" for done items offloaded);
- ``limit``: the limit holding it (queue "limited");
- ``claims``: how many times it was claimed (out: this claim included; dead: in all);
- ``reason``: why it is dead;
- ``maybe``: places that may hold an item found nowhere but were not looked in:
  "offloaded" when the project has segment files (opening them would cost a scan of every one),
  "downloader_queue" when the project has more downloaders' own queues than are looked in.
Nothing else of a claim or a dead record is shown (the IPs stay private).
"""

from __future__ import annotations

import json
import time

from tracker_core import claim_records, reply_codes, script_calls
from tracker_core import keys as keyspace

OWN_QUEUES_CHECKED = 1000  # downloaders' own queues looked in per call (the same cap as counts)
OWNERS_CACHE_S = 1.0  # a downloader queue made a moment ago is looked in within a second
DEAD_REASON = "reclaimed too often"  # claim-21.lua's dead records carry no reason of their own
FIELDS = ("status", "downloader", "queue", "limit", "claims", "reason", "maybe")


class Owners:
    """The downloaders with a queue of their own, per project, read at most once a second."""

    def __init__(self):
        self._cache: dict[str, tuple[float, list[str]]] = {}

    def get(self, conn, k: keyspace.ProjectKeys, fresh: bool = False) -> list[str]:
        cached = self._cache.get(k.project)
        if cached is not None and not fresh and cached[0] > time.monotonic():
            return cached[1]
        # SRANDMEMBER with a positive count gives distinct members: all of them up to the cap.
        owners = sorted(conn.execute_command("SRANDMEMBER", k.downloader_queues, OWN_QUEUES_CHECKED) or [])
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[k.project] = (time.monotonic() + OWNERS_CACHE_S, owners)
        return owners


def lookup(conn, k: keyspace.ProjectKeys, item: str, owners: Owners) -> dict | None:
    """Where ITEM is in the project of K (the answer described above); None: no such project."""
    for attempt in range(3):
        passed = owners.get(conn, k, fresh=attempt > 0)
        reply = script_calls.item_status(conn, k, item=item, owners=passed)
        if reply.code != reply_codes.ItemStatus.OK:
            return None
        status = reply.status or None
        total = int(reply.owners)
        # Found nowhere while the downloaders' queues changed since they were read: read again.
        if (
            status is None
            and total != len(passed)
            and not (len(passed) == OWN_QUEUES_CHECKED and total > OWN_QUEUES_CHECKED)
            and attempt < 2
        ):
            continue
        return _answer(status, reply.queue, reply.detail, total > len(passed), int(reply.segments) > 0)
    raise AssertionError("unreachable")


def _answer(status, queue: str, detail: str, queues_unchecked: bool, segments: bool) -> dict:
    answer = dict.fromkeys(FIELDS)
    answer["status"] = status
    answer["maybe"] = []
    if status == "out":
        record = claim_records.parse(detail)
        answer["downloader"] = record.downloader
        answer["claims"] = record.times_claimed
    elif status == "dead":
        try:
            record = json.loads(detail)
        except ValueError:
            record = None
        record = record if isinstance(record, dict) else {}
        answer["downloader"] = record.get("last_downloader") or None
        claims = record.get("claims")
        answer["claims"] = claims if type(claims) is int else None
        answer["reason"] = record.get("reason") or DEAD_REASON
    elif status == "todo":
        answer["queue"] = queue
        answer["limit"] = detail or None
    elif status == "offloaded":
        answer["queue"] = queue
    elif status is None:
        if segments:
            answer["maybe"].append("offloaded")
        if queues_unchecked:
            answer["maybe"].append("downloader_queue")
    return answer
