"""The warrior HQ: the projects.json document and the registry of warriors with heartbeats.

Warriors fetch the document to choose a project, register once (``warrior_id``) and post
updates every ten minutes; the registry keeps each one's record and last-seen time, forgets
warriors silent for 30 days, and counts the ones seen lately for the admins and the page.
"""
from __future__ import annotations

import json
import time
import uuid

from tracker_core import keys as keyspace
from tracker_core import scripts, settings as settings_mod

FORGET_AFTER_MS = 30 * 86_400_000
HQ_FIELDS = {"auto_project": "", "broadcast_message": "", "seesaw_version": "0.8.5"}
PROJECT_FIELDS = ("title", "description", "repository", "logo", "marker_html", "deadline", "host")
MAX_RECORD = 2000


def _now_ms() -> int:
    return int(time.time() * 1000)


def document(r, base_url: str) -> dict:
    """The projects.json document: listed projects from their settings, plus the global fields."""
    hq = dict(HQ_FIELDS)
    hq.update(r.hgetall(keyspace.HQ))
    names = sorted(r.smembers(keyspace.PROJECTS))
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keyspace.ProjectKeys(name).settings)
    projects = []
    for name, stored in zip(names, pipe.execute()):
        if not stored:
            continue
        values = settings_mod.defaults()
        values.update(stored)
        if values["warrior_listed"] != "1":
            continue
        entry = {"name": name, **{f: values[f] for f in PROJECT_FIELDS if values.get(f)}}
        entry.setdefault("title", name)
        if values.get("lat_lng"):
            entry["lat_lng"] = [float(x) for x in values["lat_lng"].split(",")]
        entry["leaderboard"] = f"{base_url}/{name}/"
        projects.append(entry)
    return {"warrior": {"seesaw_version": hq["seesaw_version"]},
            "auto_project": hq["auto_project"] or None,
            "broadcast_message": hq["broadcast_message"], "projects": projects}


def set_fields(r, values: dict[str, str]) -> None:
    unknown = set(values) - set(HQ_FIELDS)
    if unknown:
        raise ValueError(f"unknown HQ field(s) {sorted(unknown)}: use {sorted(HQ_FIELDS)}")
    if values.get("auto_project") and not keyspace.valid_project_name(values["auto_project"]):
        raise ValueError("auto_project must be a project name")
    r.hset(keyspace.HQ, mapping={k: str(v) for k, v in values.items()})


def _seen(r, warrior_id: str, record: str) -> int:
    now = _now_ms()
    return scripts.run(r, "warrior_seen", (keyspace.WARRIORS, keyspace.WARRIORS_SEEN),
                       (now, warrior_id, record, now - FORGET_AFTER_MS))


def register(r, warrior: dict, ip: str) -> str:
    """Register a warrior; return its new id."""
    warrior_id = uuid.uuid4().hex
    record = json.dumps({"warrior": warrior, "ip": ip, "registered_ms": _now_ms()})
    if len(record) > MAX_RECORD:
        raise ValueError("warrior record too large")
    _seen(r, warrior_id, record)
    return warrior_id


def heartbeat(r, warrior_id: str) -> bool:
    """Note that WARRIOR_ID is alive; False for an id the registry does not know."""
    return bool(_seen(r, warrior_id, ""))


def active_count(r, within_ms: int = 3_600_000) -> int:
    return r.zcount(keyspace.WARRIORS_SEEN, _now_ms() - within_ms, "+inf")


def list_warriors(r, offset: int = 0, count: int = 100) -> list[dict]:
    """Warriors by last seen, newest first, a page at a time."""
    count = max(1, min(count, 1000))
    rows = r.zrevrange(keyspace.WARRIORS_SEEN, offset, offset + count - 1, withscores=True)
    records = r.hmget(keyspace.WARRIORS, [w for w, _ in rows]) if rows else []
    return [{"warrior_id": w, "last_seen_ms": int(seen), **json.loads(rec or "{}")}
            for (w, seen), rec in zip(rows, records)]
