"""An item's whole story, for admins: where it is now, who had it, who did it, when, how many bytes.

The public answer (tracker_core.items.item_status) reads Redis only, at a cost bounded whatever the
project's size. An admin's answer adds what costs more or is private:
- ``ip``: the IP of the claim (out) or of the last claim (dead);
- ``rounds``: earlier claim rounds, ``{downloader, ip, claimed_ms}``, oldest first (an item
  out again after a reclaim; every round of a dead one);
- ``limit_rule``: the pattern and rate of the limit holding it;
- the segment file that holds it: a name found nowhere in Redis is looked for in every
  registered segment file (each decompressed and searched for the name at C speed, about 5 ms
  per 50,000 names; docs/performance.md, item_story_cost), so ``status`` becomes "offloaded" with
  ``segment`` and ``queue`` (where the segment returns to, or "done"), and ``maybe`` is left
  with what could not be read (see ``unread``);
- every downloader's own queue, past the cap of the public answer;
- ``done``: every done of it in the done log (stream and archived files, oldest first):
  ``{entry, at, downloader, ip, bytes, entry_items, version}`` where ``bytes`` is the entry's,
  shared by its ``entry_items`` items; a name found nowhere that the done log names while
  done_mode is discard is "done" (counted, not kept);
- ``seen``: whether the project's Bloom filter has seen the name (found nowhere and not seen:
  never queued here, or queued by a backfeed dedup key other than its whole name);
- ``unread``: one line per place that could not be read here (a segment file missing or
  corrupt, a done-log file this node does not see) or in the time allowed (the admin API and
  pages stop after STORY_BUDGET_S), so a partial answer says so.

Several names share one pass over the segment files and one over the done log (``stories``).
Reading is not one atomic step: a segment refilled or exported during the search is noticed
(the registry read again) and the names it held are looked up in Redis again.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import zstandard

from tracker_core import keyspace, scripts
from tracker_core.donelog import log_archive, log_reader
from tracker_core.items import bloom_membership, claim_records, item_status
from tracker_core.offload import segment_file, segment_registry

ADMIN_FIELDS = ("ip", "rounds", "limit_rule", "done", "seen", "unread")
OWNERS_BATCH = 1000  # own queues looked in per pipeline, past the public answer's cap
# What the admin API and pages spend on one lookup at most (reading, not counting Redis's own
# queues): a story of a project of 50 million names on disk takes about 9 s in all.
STORY_BUDGET_S = 3.0
EVERYTHING = "tracker items status reads everything"


class UnknownProject(LookupError):
    pass


def stories(
    conn, k: keyspace.ProjectKeys, directory: Path, names: list[str], budget_s: float | None = None
) -> list[dict]:
    """The admin answer for each of NAMES (in order, each with its "item"); UnknownProject.

    With BUDGET_S (the admin API and pages: a worker that serves warriors waits meanwhile), the
    done log and then the segment files are read for about that long at most, and what was left
    unread is said in "unread"; without it (the CLI) everything is read."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    owners = item_status.Owners()
    found = _read_all(conn, k, names, owners)
    answers = {name: _answer(conn, k, name, f) for name, f in found.items()}
    unread: list[str] = []
    _own_queues(conn, k, answers, found)
    try:
        done, stopped = log_reader.naming(conn, k, Path(directory), list(answers), deadline)
    except log_archive.LogUnreadable as exc:
        unread.append(str(exc))
        done, stopped = {}, None
    if stopped is not None:
        unread.append(f"the done log after entry {stopped} ({budget_s:g} s spent; {EVERYTHING})")
    _segments(conn, k, Path(directory), answers, found, owners, unread, deadline)
    discard = conn.hget(k.settings, "done_mode") == "discard"
    nowhere = [name for name, answer in answers.items() if answer["status"] is None]
    seen = dict(zip(nowhere, bloom_membership.seen_by(conn, k, [scripts.wire(n) for n in nowhere])))
    for name, answer in answers.items():
        answer["done"] = [_done_entry(rec) for rec in done.get(name, ())]
        answer["seen"] = seen.get(name)  # asked only of names found nowhere
        answer["unread"] = list(unread)
        if answer["status"] is None and answer["done"] and discard:
            answer["status"] = "done"
            answer["maybe"] = []
    return [{"item": name, **answers[name]} for name in names]


def _read_all(conn, k, names, owners) -> dict:
    found = {}
    for name in names:
        found[name] = item_status.read(conn, k, name, owners)
        if found[name] is None:
            raise UnknownProject(k.project)
    return found


def _answer(conn, k: keyspace.ProjectKeys, name: str, found: item_status.Found) -> dict:
    answer = {**item_status.public(found), **dict.fromkeys(ADMIN_FIELDS)}
    answer["rounds"] = []
    if found.status == "out":
        answer["ip"] = claim_records.parse(found.detail).ip or None
        answer["rounds"] = _rounds(_json(found.extra))
    elif found.status == "dead":
        record = item_status.dead_record(found.detail)
        answer["ip"] = record.get("last_ip") or None
        answer["rounds"] = _rounds(record.get("rounds"))
    elif found.status == "todo" and found.detail:
        rule = _json(conn.hget(k.limits, found.detail))
        if isinstance(rule, dict):
            answer["limit_rule"] = {"pattern": rule.get("pattern"), "rate": rule.get("rate")}
    return answer


def _json(text):
    try:
        return orjson.loads(text) if text else None
    except orjson.JSONDecodeError:
        return None


def _rounds(rounds) -> list[dict]:
    """Claim rounds as the scripts keep them (a JSON list of {downloader, ip, claimed_ms}),
    anything else left out (a record written by hand)."""
    if not isinstance(rounds, list):
        return []
    keep = ("downloader", "ip", "claimed_ms")
    return [{f: r.get(f) for f in keep} for r in rounds if isinstance(r, dict)]


def _own_queues(conn, k, answers: dict, found: dict) -> None:
    """Look in every downloader's own queue for the names whose public answer could not."""
    names = [n for n, f in found.items() if f.status is None and f.queues_unchecked]
    if not names:
        return
    owners = sorted(conn.smembers(k.downloader_queues))
    for name in names:
        for at in range(0, len(owners), OWNERS_BATCH):
            batch = owners[at : at + OWNERS_BATCH]
            pipe = conn.pipeline(transaction=False)
            for owner in batch:
                pipe.sismember(k.downloader_queue(owner), name)
            holder = next((o for o, held in zip(batch, pipe.execute()) if held), None)
            if holder is not None:
                answers[name].update(status="todo", queue=f"downloader:{holder}")
                break
        answer = answers[name]
        answer["maybe"] = [m for m in answer["maybe"] if m != "downloader_queue"]


def read_names(path: Path) -> bytes:
    """A segment file's names as NUL-separated UTF-8 (offload.segment_file's format), framed by
    NULs so that b"\\0NAME\\0" finds a whole name; not split (one byte search per name)."""
    with open(path, "rb") as f:
        return b"\0" + zstandard.ZstdDecompressor().stream_reader(f).read() + b"\0"


def _segments(conn, k, directory: Path, answers, found, owners, unread: list, deadline=None) -> None:
    """Find the names found nowhere in Redis in the project's segment files (until DEADLINE)."""
    wanted = {n: f for n, f in found.items() if answers[n]["status"] is None and f.segments}
    if not wanted:
        return
    for _attempt in range(3):
        sources = segment_registry.segment_sources(conn, k)
        left = {n: b"\0" + n.encode("utf-8", "surrogateescape") + b"\0" for n in wanted}
        hits, missing, skipped = {}, [], 0
        for at, number in enumerate(sorted(sources)):
            if not left:
                break
            if deadline is not None and time.monotonic() > deadline:
                skipped = len(sources) - at
                break
            try:
                data = read_names(segment_file.segment_path(directory, k.project, number))
            except segment_file.UNREADABLE as exc:
                missing.append((number, exc))
                continue
            for name, needle in list(left.items()):
                if needle in data:
                    hits[name] = number
                    del left[name]
        if skipped or segment_registry.segment_sources(conn, k) == sources:
            break
        # A segment came back (refill) or left (export) meanwhile: its names may be in Redis
        # now; read them again there and search once more for those still found nowhere.
        for name in list(wanted):
            again = item_status.read(conn, k, name, owners)
            if again is not None and again.status is not None:
                answers[name] = {**answers[name], **_answer(conn, k, name, again)}
                del wanted[name]
        if not wanted:
            return
    for name, number in hits.items():
        answers[name].update(status="offloaded", queue=sources[number], segment=number, maybe=[])
    for number, error in missing:
        unread.append(f"segment {number}: {error}".splitlines()[0])
    if skipped and left:
        unread.append(f"{skipped} of {len(sources)} segment files not searched (time spent; {EVERYTHING})")
    if not missing and not (skipped and left):  # every file was searched: a name in none is in none
        for name in left:
            answers[name]["maybe"] = [m for m in answers[name]["maybe"] if m != "offloaded"]


def _done_entry(rec: dict) -> dict:
    items = rec.get("items") or []
    return {
        "entry": rec.get("entry"),
        "at": rec.get("at"),
        "downloader": rec.get("downloader"),
        "ip": rec.get("ip") or None,
        "bytes": rec.get("bytes"),
        "entry_items": len(items),
        "version": rec.get("version"),
    }
