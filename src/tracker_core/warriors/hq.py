"""The warrior HQ: the projects.json document and the registry of warriors with heartbeats.

Warriors fetch the document to choose a project, register once (``warrior_id``) and post an
update every ten minutes (seesaw's ``Warrior.update_warrior_hq``): that update is the
heartbeat. The registry keeps each warrior's record (version, IP, registration time, and what
its last heartbeat carried: nickname, selected project, position, time), forgets warriors
silent for 30 days, and counts as online those whose last heartbeat is at most
ONLINE_WITHIN_MS old (two update intervals and five minutes: one lost update is not an exit).
A registration alone is not a heartbeat: its warrior is listed but not online until its first
update.

Anyone can register, so the registry is bounded: a record keeps only validated fields of
bounded length (version 64 printable ASCII characters, downloader as /request takes it,
selected project as a project name, position as two numbers in range), at most MAX_RECORD
bytes; an address (an IPv6 /64) registers at most ``Bounds.registrations_per_hour`` times an
hour (default 10); the registry holds at most ``Bounds.warriors_max`` warriors (default 250,000).
The operator sets both (``tracker serve --warriors-max``/``--registrations-per-hour``, or
TRACKER_WARRIORS_MAX/TRACKER_REGISTRATIONS_PER_HOUR read by the CLI); they reach the HQ face in
its AppConfig, never through the environment. Measured in Redis 7.0 (5,000 warriors, each address's throttle counter included):
615 bytes per warrior as seesaw registers and sends heartbeats, 842 at worst (longest fields,
IPv6): about 211 MB at the bound (docs/operations.md, "Warrior HQ"). Past a bound,
``register`` raises NotRegistered and stores nothing.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass

from tracker_core import keyspace, scripts
from tracker_core.compiled import protocol
from tracker_core.errors import BadInput
from tracker_core.infra import redis_clock
from tracker_core.project import safe_html, settings_schema

FORGET_AFTER_MS = 30 * 86_400_000
MAX_WARRIORS = 250_000
REGISTRATIONS_PER_HOUR = 10
REGISTRATION_WINDOW_MS = 3_600_000
MAX_VERSION_CHARS = 64
# Printable ASCII, so a record's JSON stays under MAX_RECORD however the version is escaped.
VERSION_RE = re.compile(rf"[\x20-\x7e]{{0,{MAX_VERSION_CHARS}}}\Z")
# tracker_banner_html is not part of projects.json: the front page (GET /) shows it as HTML a
# global admin set (only global admins set these fields), kept to safe_html's allowlist.
HQ_FIELDS = {
    "auto_project": "",
    "broadcast_message": "",
    "seesaw_version": "0.8.5",
    "tracker_banner_html": "",
}
PROJECT_FIELDS = ("title", "description", "repository", "logo", "marker_html", "deadline", "host")
# The longest record: a version of 64 characters that JSON escapes to 128, an IP (at most 64
# characters), the two times, a 30-character downloader, a 64-character project, a position.
MAX_RECORD = 640
UPDATE_INTERVAL_MS = 600_000  # seesaw's hq_updater: every ten minutes
ONLINE_WITHIN_MS = 2 * UPDATE_INTERVAL_MS + 300_000
# seesaw's User-Agent on its update: "ArchiveTeam Warrior/0.10.3 Standalone".
USER_AGENT_VERSION_RE = re.compile(r"ArchiveTeam Warrior/(\S{1,64})")
# The shape of the ids register() hands out: a heartbeat from a forgotten id of this shape is
# registered again (seesaw keeps its id for ever and never registers a second time).
WARRIOR_ID_RE = re.compile(r"[0-9a-f]{32}\Z")
MAX_LAT_LNG_CHARS = 64


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
        values = settings_schema.with_stored(stored)
        if values["warrior_listed"] != "1":
            continue
        entry = {"name": name, **{f: values[f] for f in PROJECT_FIELDS if values.get(f)}}
        if "marker_html" in entry:
            # Cleaned when set too; again here for a value stored before that rule.
            entry["marker_html"] = safe_html.clean(entry["marker_html"])
        entry.setdefault("title", name)
        if values.get("lat_lng"):
            entry["lat_lng"] = [float(x) for x in values["lat_lng"].split(",")]
        entry["leaderboard"] = f"{base_url}/{name}/"
        projects.append(entry)
    return {
        "warrior": {"seesaw_version": hq["seesaw_version"]},
        "auto_project": hq["auto_project"] or None,
        "broadcast_message": hq["broadcast_message"],
        "projects": projects,
    }


def set_fields(r, values: dict[str, str]) -> dict[str, str]:
    """Set the document's global fields, the banner kept to safe_html's allowlist; what was
    stored. BadInput for an unknown field or a bad auto_project."""
    unknown = set(values) - set(HQ_FIELDS)
    if unknown:
        raise BadInput(f"unknown HQ field(s) {sorted(unknown)}: use {sorted(HQ_FIELDS)}")
    if values.get("auto_project") and not keyspace.valid_project_name(values["auto_project"]):
        raise BadInput("auto_project must be a project name")
    stored = {k: str(v) for k, v in values.items()}
    if "tracker_banner_html" in stored:
        stored["tracker_banner_html"] = safe_html.clean(stored["tracker_banner_html"])
    r.hset(keyspace.HQ, mapping=stored)
    return stored


class NotRegistered(Exception):
    """Registration refused, nothing stored; FIELD is the counter it is counted under."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field


REFUSALS = {
    scripts.register_warrior.codes.THROTTLED: (
        "register_throttled",
        "too many registrations from this address this hour",
    ),
    scripts.register_warrior.codes.REGISTRY_FULL: ("register_registry_full", "the warrior registry is full"),
}


@dataclass(frozen=True)
class Bounds:
    """What anyone can make the registry hold (the operator's settings)."""

    warriors_max: int = MAX_WARRIORS
    registrations_per_hour: int = REGISTRATIONS_PER_HOUR  # per address (an IPv6 /64)


def register(
    r,
    warrior: dict,
    ip: str,
    address_key: str | None = None,
    warrior_id: str | None = None,
    bounds: Bounds = Bounds(),
) -> str:
    """Register a warrior from IP; return its new id, or raise NotRegistered past a bound.

    Only the version is kept of what the warrior sent: the rest is the client's to fill, and
    the registry must not hold what anyone chooses to send. ADDRESS_KEY is what the throttle
    counts under (IP unless given: the API passes an IPv6 address's /64). WARRIOR_ID registers
    a forgotten id again (a heartbeat's, of the WARRIOR_ID_RE shape) under the same BOUNDS.
    """
    version = warrior.get("version", "")
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise ValueError(f"warrior version must be at most {MAX_VERSION_CHARS} printable ASCII characters")
    now = redis_clock.now_ms(r)
    if warrior_id is None:
        warrior_id = uuid.uuid4().hex
    elif not WARRIOR_ID_RE.match(warrior_id):
        raise ValueError("warrior id must be 32 lowercase hex digits")
    record = json.dumps(
        {"warrior": {"version": version} if version else {}, "ip": ip[:64], "registered_ms": now}
    )
    if len(record) > MAX_RECORD:
        raise ValueError("warrior record too large")
    # Indexed as last heard from just before the online window: listed and forgotten on the
    # same schedule as the others, online only once it sends a heartbeat.
    outcome = scripts.register_warrior(
        r,
        now_ms=now,
        warrior_id=warrior_id,
        record=record,
        address_key=address_key or ip[:64],
        forget_before_ms=now - FORGET_AFTER_MS,
        max_warriors=max(1, bounds.warriors_max),
        max_registrations=max(1, bounds.registrations_per_hour),
        window_ms=REGISTRATION_WINDOW_MS,
        seen_ms=now - ONLINE_WITHIN_MS - 1,
    )
    if outcome != scripts.register_warrior.codes.REGISTERED:
        raise NotRegistered(*REFUSALS[outcome])
    return warrior_id


def _absent(value) -> bool:
    """seesaw sends null for what it does not know (lat_lng, a downloader never set)."""
    return value is None or value == ""


def _lat_lng(value) -> list[float]:
    """[lat, lng] from two numbers or a "LAT/LNG" or "LAT,LNG" string (what seesaw's
    handle_lat_lng keeps); ValueError unless both are finite and in range."""
    if isinstance(value, str):
        if len(value) > MAX_LAT_LNG_CHARS:
            raise ValueError
        value = value.replace("/", ",").split(",")
        if len(value) != 2:
            raise ValueError
        value = [float(part) for part in value]  # ValueError for anything else
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or any(type(x) not in (int, float) for x in value)
    ):
        raise ValueError
    lat, lng = (float(x) for x in value)
    if not (math.isfinite(lat) and math.isfinite(lng) and -90 <= lat <= 90 and -180 <= lng <= 180):
        raise ValueError
    return [round(lat, 6), round(lng, 6)]


HEARTBEAT_REASONS = {
    "downloader": "downloader must match ^[-_a-zA-Z0-9]{3,30}$",
    "selected_project": "selected_project must be a project name (or auto, none)",
    "lat_lng": 'lat_lng must be [latitude, longitude] in range (or "LAT/LNG")',
    "version": f"version must be at most {MAX_VERSION_CHARS} printable ASCII characters",
}


def heartbeat_fields(warrior: dict, user_agent: str | None = None) -> tuple[dict, list[str]]:
    """What a heartbeat WARRIOR carries that the registry keeps, validated: (fields, refused).

    FIELDS holds the valid ones (absent and null ones left out, so a value stays until a
    heartbeat replaces it); REFUSED names the others, which are not kept. The version comes
    from the body when it holds one, else from seesaw's User-Agent.
    """
    fields, refused = {}, []
    downloader = warrior.get("downloader")
    if not _absent(downloader):
        if protocol.valid_downloader(downloader):
            fields["downloader"] = downloader
        else:
            refused.append("downloader")
    project = warrior.get("selected_project")
    if not _absent(project):
        # A project name ("auto" and "none" match as well).
        if isinstance(project, str) and keyspace.PROJECT_NAME_RE.match(project):
            fields["selected_project"] = project
        else:
            refused.append("selected_project")
    lat_lng = warrior.get("lat_lng")
    if not _absent(lat_lng):
        try:
            fields["lat_lng"] = _lat_lng(lat_lng)
        except (ValueError, TypeError, OverflowError):
            refused.append("lat_lng")
    version = warrior.get("version")
    if _absent(version) and user_agent:
        found = USER_AGENT_VERSION_RE.match(user_agent)
        version = found.group(1) if found and VERSION_RE.match(found.group(1)) else None
    if not _absent(version):
        if isinstance(version, str) and VERSION_RE.match(version):
            fields["version"] = version
        else:
            refused.append("version")
    return fields, refused


def heartbeat(r, warrior_id: str, fields: dict | None = None, ip: str | None = None) -> bool:
    """Note that WARRIOR_ID is alive and keep what its heartbeat carried (FIELDS from
    heartbeat_fields, the IP it came from); False for an id the registry does not know."""
    now = redis_clock.now_ms(r)
    beat = dict(fields or {}, seen_ms=now)
    if ip is not None:
        beat["ip"] = ip[:64]
    outcome = scripts.warrior_seen(
        r,
        now_ms=now,
        warrior_id=warrior_id,
        forget_before_ms=now - FORGET_AFTER_MS,
        beat=json.dumps(beat),
        max_record=MAX_RECORD,
    )
    return outcome == scripts.warrior_seen.codes.SEEN


def online_count(conn) -> int:
    """Warriors whose last heartbeat is at most ONLINE_WITHIN_MS old (all projects, wall
    clock); CONN is redis-py or RawRedis. What every view of "warriors online" shows."""
    return int(
        conn.execute_command(
            "ZCOUNT",
            keyspace.WARRIORS_SEEN,
            f"({redis_clock.now_ms(conn, checked=False) - ONLINE_WITHIN_MS}",
            "+inf",
        )
    )


def active_count(r, within_ms: int = 3_600_000) -> int:
    """Warriors whose last heartbeat (or registration) is within WITHIN_MS, give or take the
    online window a registration is indexed behind."""
    return r.zcount(keyspace.WARRIORS_SEEN, redis_clock.now_ms(r) - within_ms, "+inf")


def list_warriors(r, offset: int = 0, count: int = 100) -> list[dict]:
    """Warriors by last heartbeat, newest first, a page at a time.

    Each has its record, ``last_heartbeat_ms`` (None before its first heartbeat),
    ``last_seen_ms`` (its last heartbeat, else its registration) and ``online``.
    """
    count = max(1, min(count, 1000))
    rows = r.zrevrange(keyspace.WARRIORS_SEEN, offset, offset + count - 1, withscores=True)
    records = r.hmget(keyspace.WARRIORS, [w for w, _ in rows]) if rows else []
    since = redis_clock.now_ms(r) - ONLINE_WITHIN_MS
    listed = []
    for (warrior_id, seen), text in zip(rows, records):
        record = json.loads(text or "{}")
        heard = record.pop("seen_ms", None)
        listed.append(
            {
                "warrior_id": warrior_id,
                **record,
                "last_heartbeat_ms": heard,
                "last_seen_ms": int(heard or record.get("registered_ms") or seen),
                "online": seen > since,
            }
        )
    return listed


def registry(r, offset: int = 0, count: int = 100) -> dict:
    """The admin's view of the registry (GET /api/admin/warriors, `tracker admin warriors`)."""
    return {
        "online": online_count(r),
        "online_within_s": ONLINE_WITHIN_MS // 1000,
        "active_last_hour": active_count(r),
        "warriors": list_warriors(r, offset, count),
    }
