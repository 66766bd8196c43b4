"""The warrior HQ: the projects.json document and the registry of warriors with heartbeats.

Warriors fetch the document to choose a project, register once (``warrior_id``) and post
updates every ten minutes; the registry keeps each one's record and last-seen time, forgets
warriors silent for 30 days, and counts the ones seen lately for the admins and the page.

Anyone can register, so the registry is bounded: a record keeps only the warrior's version
(64 characters), its IP and the time, so at most MAX_RECORD bytes; an address (an IPv6 /64)
registers at most ``TRACKER_REGISTRATIONS_PER_HOUR`` times an hour (default 10); the registry
holds at most ``TRACKER_WARRIORS_MAX`` warriors (default 250,000). Measured in Redis 7.0: 335
bytes per warrior as seesaw registers (84 MB at the bound), 575 at worst (longest version and
IPv6 address, each from its own /64 so each leaves a throttle counter for an hour): 144 MB at
the bound. Past a bound, ``register`` raises NotRegistered and stores nothing.
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid

from tracker_core import keys as keyspace
from tracker_core import scripts, settings as settings_mod

FORGET_AFTER_MS = 30 * 86_400_000
MAX_WARRIORS = 250_000
REGISTRATIONS_PER_HOUR = 10
REGISTRATION_WINDOW_MS = 3_600_000
MAX_VERSION_CHARS = 64
# Printable ASCII, so a record's JSON stays under MAX_RECORD however the version is escaped.
VERSION_RE = re.compile(r"[\x20-\x7e]{0,%d}\Z" % MAX_VERSION_CHARS)
# tracker_banner_html is not part of projects.json: the front page (GET /) shows it as HTML a
# global admin set (only global admins set these fields).
HQ_FIELDS = {"auto_project": "", "broadcast_message": "", "seesaw_version": "0.8.5",
             "tracker_banner_html": ""}
PROJECT_FIELDS = ("title", "description", "repository", "logo", "marker_html", "deadline", "host")
MAX_RECORD = 256


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


class NotRegistered(Exception):
    """Registration refused, nothing stored; FIELD is the counter it is counted under."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field


REFUSALS = {-1: ("register_throttled", "too many registrations from this address this hour"),
            -2: ("register_registry_full", "the warrior registry is full")}


def _bound(name: str, default: int) -> int:
    """A bound from the environment (an operator's setting), else DEFAULT."""
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def register(r, warrior: dict, ip: str, address_key: str | None = None) -> str:
    """Register a warrior from IP; return its new id, or raise NotRegistered past a bound.

    Only the version is kept of what the warrior sent: the rest is the client's to fill, and
    the registry must not hold what anyone chooses to send. ADDRESS_KEY is what the throttle
    counts under (IP unless given: the API passes an IPv6 address's /64).
    """
    version = warrior.get("version", "")
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise ValueError(f"warrior version must be at most {MAX_VERSION_CHARS} printable ASCII "
                         "characters")
    now = _now_ms()
    warrior_id = uuid.uuid4().hex
    record = json.dumps({"warrior": {"version": version} if version else {}, "ip": ip[:64],
                         "registered_ms": now})
    if len(record) > MAX_RECORD:
        raise ValueError("warrior record too large")
    outcome = scripts.run(
        r, "register_warrior", (keyspace.WARRIORS, keyspace.WARRIORS_SEEN,
                                keyspace.warrior_registrations(address_key or ip[:64])),
        (now, warrior_id, record, now - FORGET_AFTER_MS,
         _bound("TRACKER_WARRIORS_MAX", MAX_WARRIORS),
         _bound("TRACKER_REGISTRATIONS_PER_HOUR", REGISTRATIONS_PER_HOUR), REGISTRATION_WINDOW_MS))
    if outcome < 0:
        raise NotRegistered(*REFUSALS[outcome])
    return warrior_id


def heartbeat(r, warrior_id: str) -> bool:
    """Note that WARRIOR_ID is alive; False for an id the registry does not know."""
    now = _now_ms()
    return bool(scripts.run(r, "warrior_seen", (keyspace.WARRIORS, keyspace.WARRIORS_SEEN),
                            (now, warrior_id, now - FORGET_AFTER_MS)))


def active_count(r, within_ms: int = 3_600_000) -> int:
    return r.zcount(keyspace.WARRIORS_SEEN, _now_ms() - within_ms, "+inf")


def list_warriors(r, offset: int = 0, count: int = 100) -> list[dict]:
    """Warriors by last seen, newest first, a page at a time."""
    count = max(1, min(count, 1000))
    rows = r.zrevrange(keyspace.WARRIORS_SEEN, offset, offset + count - 1, withscores=True)
    records = r.hmget(keyspace.WARRIORS, [w for w, _ in rows]) if rows else []
    return [{"warrior_id": w, "last_seen_ms": int(seen), **json.loads(rec or "{}")}
            for (w, seen), rec in zip(rows, records)]
