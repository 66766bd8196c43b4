"""Where an item is: every place an item can be, read in one script call (item_status-n.lua).

Anonymous clients ask (``GET /P/items/ITEM.json``), so the cost of a name found nowhere stays
bounded whatever the project's size: exact lookups in the shared queues, in at most
OWN_QUEUES_CHECKED downloaders' own queues and under each limit; the name is never classified,
segment files are never opened and the done log is never read (finding a name there is a scan:
tracker_core.admin.item_story does that for admins). The answer keeps the old tracker's two keys
(``status``, ``downloader``: the same values for todo, out and done) and adds the rest:

- ``status``: "todo", "out", "done", "dead", "offloaded" (on its way to a segment file), or
  None (found nowhere: unknown, done and not kept, or in a segment file: see ``maybe``);
- ``downloader``: who holds it (out) or held it last (dead);
- ``queue``: the queue it waits in (todo: "todo", "backfeed", "secondary", "redo",
  "downloader:NAME", or "limited" when a limit holds it); for offloaded, the queue its segment
  comes from and returns to ("done" for done items offloaded);
- ``limit``: the limit holding it (queue "limited");
- ``claims``: how many times it was claimed (out: this claim included; dead: in all);
- ``reason``: why it is dead;
- ``since``: when (ms) it was claimed (out) or declared dead (dead);
- ``segment``: the number of the segment file it is being written to (offloaded);
- ``maybe``: places that may hold an item found nowhere but were not looked in:
  "offloaded" when the project has segment files (opening them would cost a scan of every one),
  "downloader_queue" when the project has more downloaders' own queues than are looked in.
Nothing else of a claim or a dead record is shown: the IPs and earlier rounds are the admins'
(``read`` gives item_story the whole of what the script found).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

from tracker_core import keyspace, scripts
from tracker_core.items import claim_records

OWN_QUEUES_CHECKED = 1000  # downloaders' own queues looked in per call (the same cap as counts)
OWNERS_CACHE_S = 1.0  # a downloader queue made a moment ago is looked in within a second
DEAD_REASON = "reclaimed too often"  # claim-21.lua's dead records carry no reason of their own
FIELDS = ("status", "downloader", "queue", "limit", "claims", "reason", "since", "segment", "maybe")


class Owners:
    """The downloaders with a queue of their own, per project shard (each shard has its own set),
    read at most once a second."""

    def __init__(self):
        self._cache: dict[str, tuple[float, list[str]]] = {}

    def get(self, conn, k: keyspace.ProjectKeys, fresh: bool = False) -> list[str]:
        cached = self._cache.get(k.tag)
        if cached is not None and not fresh and cached[0] > time.monotonic():
            return cached[1]
        # SRANDMEMBER with a positive count gives distinct members: all of them up to the cap.
        owners = sorted(conn.execute_command("SRANDMEMBER", k.downloader_queues, OWN_QUEUES_CHECKED) or [])
        if len(self._cache) > 10000:
            self._cache.clear()
        self._cache[k.tag] = (time.monotonic() + OWNERS_CACHE_S, owners)
        return owners


class Found(NamedTuple):
    """What the script found of an item, for the public answer and item_story's."""

    status: str | None  # out, done, dead, todo, offloaded, or None (found nowhere in Redis)
    queue: str
    detail: str  # out: the claim record; dead: the dead record (JSON); todo: the holding limit
    queues_unchecked: bool  # downloaders' own queues were left unlooked-at
    segments: bool  # the project has registered segment files
    out_score: str  # out: its `out` score
    extra: str  # out: earlier claim rounds (JSON); offloaded: the staged segment's number


def read(conn, k: keyspace.ProjectKeys, item: str, owners: Owners) -> Found | None:
    """What the script finds of ITEM in the project of K; None: no such project."""
    for attempt in range(3):
        passed = owners.get(conn, k, fresh=attempt > 0)
        reply = scripts.item_status(conn, k, item=item, owners=passed)
        if reply.code != scripts.item_status.codes.OK:
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
        return Found(
            status,
            reply.queue,
            reply.detail,
            total > len(passed),
            int(reply.segments) > 0,
            reply.out_score,
            reply.extra,
        )
    raise AssertionError("unreachable")


def lookup(conn, k: keyspace.ProjectKeys, item: str, owners: Owners) -> dict | None:
    """Where ITEM is in the project of K (the answer described above); None: no such project."""
    found = read(conn, k, item, owners)
    return None if found is None else public(found)


def claimed_ms(record: claim_records.ClaimRecord, out_score: str) -> int | None:
    """A claim's time: its record's, or (a record of three fields) its `out` score."""
    if record.claimed_ms is not None:
        return record.claimed_ms
    try:
        return int(float(out_score))
    except ValueError:  # '' or 'inf': none known
        return None


def dead_record(detail: str) -> dict:
    """The dead record as a dict ({} when it is not a JSON object: written by hand)."""
    try:
        record = json.loads(detail)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _int_or_none(value):
    return value if type(value) is int else None


def public(found: Found) -> dict:
    """The answer anyone may have: no IP, no earlier rounds, nothing read from disk."""
    answer: dict[str, Any] = dict.fromkeys(FIELDS)
    answer["status"] = found.status
    answer["maybe"] = []
    if found.status == "out":
        record = claim_records.parse(found.detail)
        answer["downloader"] = record.downloader
        answer["claims"] = record.times_claimed
        answer["since"] = claimed_ms(record, found.out_score)
    elif found.status == "dead":
        dead = dead_record(found.detail)
        answer["downloader"] = dead.get("last_downloader") or None
        answer["claims"] = _int_or_none(dead.get("claims"))
        answer["reason"] = dead.get("reason") or DEAD_REASON
        answer["since"] = _int_or_none(dead.get("dead_ms"))
    elif found.status == "todo":
        answer["queue"] = found.queue
        answer["limit"] = found.detail or None
    elif found.status == "offloaded":
        answer["queue"] = found.queue
        answer["segment"] = int(found.extra) if found.extra.isdigit() else None
    elif found.status is None:
        if found.segments:
            answer["maybe"].append("offloaded")
        if found.queues_unchecked:
            answer["maybe"].append("downloader_queue")
    return answer
