"""Project settings: their names, types and defaults, validation, and the per-process cache entry.

Settings live in the project's ``settings`` hash. Every change goes through the ``set_settings``
script, which bumps ``settings_age``; claim and done return the age, so a process notices a change
on its next request to that project and reloads (no restart, no polling).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import orjson

from tracker_core.compiled import protocol
from tracker_core.project import safe_html
from tracker_core.project.project_links import http_url
from tracker_core.scripts.constants import (  # re-exported: the scripts fall back to the same values
    DEFAULT_LOG_MAXLEN,
    DEFAULT_MAX_BYTES_PER_ITEM,
    DEFAULT_RECLAIM_TTL_S,
    MAX_LOG_MAXLEN,
    MAX_MULTI_CEILING,
    SETTINGS_PAD_FIELD,
)

UPLOAD_TARGET_RE = re.compile(r"(rsync://.+/|https?://.+/)\Z")
# The settings whose combination decides whether offloaded queue items come back (offload_rules).
OFFLOAD_FIELDS = ("offload_high", "offload_low", "offload_segment_items")
OFFLOAD_SEGMENT_DEFAULT = 50_000


def _int_at_least(least: int):
    def check(value: str) -> str:
        number = int(value)
        if number < least:
            raise ValueError(f"must be {least} or more")
        return str(number)

    return check


_non_negative_int = _int_at_least(0)
_positive_int = _int_at_least(1)


def _non_negative_number(value: str) -> str:
    number = float(value)
    if not number >= 0 or number == float("inf"):
        raise ValueError("must be a number, 0 or more")
    return repr(number) if number != int(number) else str(int(number))


def _flag(value: str) -> str:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return "1"
    if lowered in ("0", "false", "no", "off"):
        return "0"
    raise ValueError("must be true or false")


def _version(value: str) -> str:
    if value and not protocol.version_key(value):
        raise ValueError("must contain a number, like 20240102.01")
    return value


def _done_mode(value: str) -> str:
    if value not in ("keep", "discard", "offload"):
        raise ValueError("must be keep, discard or offload")
    return value


def _text(limit: int):
    def check(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"must be at most {limit} characters")
        return value

    return check


def _html(limit: int):
    """HTML others' browsers render, kept to safe_html's allowlist (and stored so)."""

    def check(value: str) -> str:
        return safe_html.bounded_clean(value, limit)

    return check


def _lat_lng(value: str) -> str:
    if not value:
        return value
    lat, sep, lng = value.partition(",")
    if not sep or not (-90 <= float(lat) <= 90 and -180 <= float(lng) <= 180):
        raise ValueError("must be LAT,LNG in degrees")
    return f"{float(lat):g},{float(lng):g}"


MAX_EXTRA_PARAMETERS_BYTES = 4096  # as stored (compact JSON, UTF-8); sent with every claim


def _extra_parameters(value: str) -> str:
    """A JSON object whose keys go into every api_version 2 claim answer; '' for none.

    Data only: it is parsed here and sent as JSON, never evaluated. item_name is the answer's
    own key, so it may not be given here.
    """
    if not value.strip():
        return ""
    # Bounded before parsing: a long text of brackets would exhaust the parser's recursion.
    if len(value) > 4 * MAX_EXTRA_PARAMETERS_BYTES:
        raise ValueError(f"must be at most {MAX_EXTRA_PARAMETERS_BYTES} bytes as compact JSON")
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise ValueError('must be a JSON object, like {"key": "value"}') from None
    if type(parsed) is not dict:
        raise ValueError('must be a JSON object, like {"key": "value"}')
    if "item_name" in parsed:
        raise ValueError("may not set item_name (the answer's own key)")
    if "" in parsed:
        raise ValueError("keys must not be empty")
    # The claim answer is written by orjson: what it cannot write (nested deeper than 254
    # levels) would fail every answer, so it is refused here.
    try:
        text = orjson.dumps(parsed).decode()
    except orjson.JSONEncodeError as exc:
        raise ValueError(f"cannot be sent: {exc}") from None
    if len(text.encode("utf-8")) > MAX_EXTRA_PARAMETERS_BYTES:
        raise ValueError(f"must be at most {MAX_EXTRA_PARAMETERS_BYTES} bytes as compact JSON")
    return text


def _bytes_per_item(value: str) -> str:
    number = int(_non_negative_int(value))
    if number >= protocol.MAX_DONE_BYTES:
        raise ValueError(f"must be below {protocol.MAX_DONE_BYTES} (what one done may report)")
    return str(number)


# name -> (validator, default, what it means). The defaults are what a new project gets.
SETTINGS = {
    "title": (_text(200), "", "human-readable project name"),
    "description": (_text(5000), "", "shown on the leaderboard and in projects.json"),
    "paused": (_flag, "0", "when true, requests get 404 and nothing is handed out"),
    "rate_limit": (_non_negative_number, "0", "items handed out per minute, spread evenly; 0 = unlimited"),
    "rate_burst": (_non_negative_number, "0", "items that may go out at once; 0 = one second's worth"),
    "max_claims_per_downloader": (_non_negative_int, "0", "claims one downloader may hold; 0 = unlimited"),
    "max_multi": (_non_negative_int, "100", "most items one request may claim (multi=K is capped)"),
    # A claim whose answer was lost (worker killed, the client's 20 s timeout) is only ever
    # found again by reclaiming, so every project reclaims unless told not to.
    "reclaim_ttl_s": (
        _non_negative_number,
        str(DEFAULT_RECLAIM_TTL_S),
        "a claim may be reclaimed once older than this x its claim count; 0 = never",
    ),
    "claims_limit": (_non_negative_int, "0", "most items out at once (reclaims served first); 0 = no cap"),
    "max_reclaims": (_non_negative_int, "0", "reclaims after which an item goes to `dead`; 0 = never"),
    "offload_high": (
        _non_negative_int,
        "0",
        "items of each of todo, todo:backfeed, todo:secondary and todo:redo above "
        "which `tracker maintain` moves the excess to disk; 0 = off",
    ),
    "offload_low": (
        _non_negative_int,
        "0",
        "items of a queue below which its offloaded segments come back into it; with "
        "offload_high set, at least 1 and below it (set both in one change)",
    ),
    "offload_segment_items": (
        _positive_int,
        str(OFFLOAD_SEGMENT_DEFAULT),
        "items per offloaded segment file; at most offload_high - offload_low",
    ),
    "backfeed_max_items": (
        _non_negative_int,
        "5000000",
        "while offloading is off: most items backfeed's queue and the items "
        "held by limits may hold; past it a post gets 503 (grab scripts retry "
        "later); 0 = no bound",
    ),
    "ignore_global_blocked": (
        _flag,
        "0",
        "when true, global blocks do not apply to this project (its own blocks still do)",
    ),
    "extra_parameters": (
        _extra_parameters,
        "",
        "a JSON object (at most 4,096 bytes) whose keys are added to every "
        "api_version 2 /request answer (seesaw copies them into the item); "
        "data only, never evaluated; not item_name",
    ),
    "min_version": (_version, "", "oldest grab-script version accepted (older ones get 455)"),
    "done_mode": (
        _done_mode,
        "keep",
        "keep: done items stay in `done`; discard: only counted; offload: `done` beyond "
        "done_offload_high goes to segment files (counted; the public item status says "
        "maybe offloaded, an admin's lookup finds them)",
    ),
    "done_offload_high": (
        _non_negative_int,
        "100000",
        "with done_mode=offload: done items kept in Redis; `tracker maintain` "
        "moves the excess to segment files",
    ),
    "log_maxlen": (_non_negative_int, str(DEFAULT_LOG_MAXLEN), "entries kept in the capped log stream"),
    "accept_queued_dones": (
        _flag,
        "0",
        "when true, a done for an item waiting in a queue (never claimed, or "
        "given back) completes it, as the old tracker did; by default it "
        "changes nothing and counts in dones_refused",
    ),
    "max_bytes_per_item": (
        _bytes_per_item,
        str(DEFAULT_MAX_BYTES_PER_ITEM),
        "bytes one done may credit per item it completes (more is cut to this, "
        "counted in dones_bytes_clamped); 0 = only the 10 TB per done",
    ),
    # The warrior HQ document (projects.json) is built from these.
    "warrior_listed": (_flag, "1", "list the project in projects.json for warriors"),
    "repository": (_text(500), "", "projects.json: the grab script's git repository"),
    "logo": (_text(500), "", "projects.json: logo URL"),
    # The leaderboard's links: http(s) only (project_links checks them again where shown).
    "repository_url": (http_url, "", "leaderboard: the project's repository, an http(s) URL"),
    "logo_url": (http_url, "", "leaderboard: the project's logo, an http(s) URL"),
    "marker_html": (
        _html(2000),
        "",
        "projects.json: HTML of the map marker (links, b, i, em, strong, code, br, p, span and the "
        "like; anything else is removed: docs/operations.md, Sanitised HTML)",
    ),
    "lat_lng": (_lat_lng, "", "projects.json: map position as LAT,LNG"),
    "deadline": (_text(40), "", "projects.json: when the site goes away, like 2013-04-30T23:59:59Z"),
    "host": (_text(200), "", "projects.json: the site's host name"),
}


def validate(name: str, value: str) -> str:
    """Return the normalised value of setting NAME, or raise ValueError with a one-line reason."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r} (known: {', '.join(sorted(SETTINGS))})")
    try:
        normalised = SETTINGS[name][0](value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if name == "max_multi" and not 1 <= int(normalised) <= MAX_MULTI_CEILING:
        raise ValueError(f"max_multi: must be between 1 and {MAX_MULTI_CEILING}")
    if name == "log_maxlen" and int(normalised) > MAX_LOG_MAXLEN:
        raise ValueError(f"log_maxlen: must be at most {MAX_LOG_MAXLEN}")
    return normalised


def defaults() -> dict[str, str]:
    return {name: spec[1] for name, spec in SETTINGS.items()}


def with_stored(stored: dict) -> dict[str, str]:
    """The defaults overridden by STORED (a settings hash as read), without the field that only
    keeps the hash's encoding (script_constants.SETTINGS_PAD_FIELD)."""
    merged = defaults()
    merged.update(stored)
    merged.pop(SETTINGS_PAD_FIELD, None)
    return merged


@dataclass(frozen=True)
class OffloadWatermarks:
    """Queue offloading as `tracker maintain` applies it: a shared queue past HIGH goes to disk
    (0: off, and every queue segment comes back), one below LOW gets its segments back,
    PER_SEGMENT items a file. PROBLEM says why the settings as stored could leave items on disk
    or send refilled ones straight back (the numbers are then safe stand-ins); None if sound."""

    high: int
    low: int
    per_segment: int
    problem: str | None = None


def _offload_count(values: dict, name: str) -> tuple[int, str | None]:
    """Setting NAME of VALUES as a count (absent: its default), and why it is unusable if so.

    Validation only ever stored whole numbers; anything else was written past it, and stands
    for the default (it must not stop a maintenance pass)."""
    default = SETTINGS[name][1]
    text = values.get(name) or default
    if not (text.isascii() and text.isdigit()):
        return int(default), f"{name}={text[:40]!r} is not a whole number"
    number = int(text)
    if name == "offload_segment_items" and number == 0:  # 0 always meant the default
        return OFFLOAD_SEGMENT_DEFAULT, None
    return number, None


def _offload_problem(high: int, low: int, per_segment: int) -> str | None:
    """Why these watermarks could strand offloaded queue items (or refill them only for the next
    pass to offload them again): refills happen while a queue is below LOW, a whole segment at a
    time, and whatever lies past HIGH goes back to disk."""
    if high == 0:
        return None  # offloading off: every queue segment comes back
    if high == 1:
        return "offload_high=1 leaves no room for offload_low below it: use 0 (off) or at least 2"
    if low == 0:
        return (
            f"offload_high={high} without offload_low: offloaded items would never come back; "
            f"set offload_low (1 to {high - 1}) in the same change"
        )
    if low >= high:
        return (
            f"offload_low={low} is not below offload_high={high}: refilled items would go "
            "straight back to disk; set offload_low below offload_high"
        )
    if per_segment > high - low:
        return (
            f"offload_segment_items={per_segment} is more than offload_high - offload_low "
            f"= {high - low}: a refilled segment would take the queue past offload_high and "
            f"back to disk; set offload_segment_items at most {high - low} in the same change"
        )
    return None


def offload_rules(values: dict) -> OffloadWatermarks:
    """The queue-offloading watermarks of VALUES (a settings hash as stored, or the defaults
    with a change applied), checked: every offloaded item must be able to come back.

    A change is refused with ``problem``; a project stored with such settings by an older
    tracker is refilled with the stand-ins returned here, which keep offload_high (the memory
    bound) and, up to half of it, the segment size, and put offload_low where a refilled
    segment fits below offload_high.
    """
    (high, bad_high), (low, bad_low), (per_segment, bad_segment) = (
        _offload_count(values, name) for name in OFFLOAD_FIELDS
    )
    problem = bad_high or bad_low or bad_segment or _offload_problem(high, low, per_segment)
    if problem is None or high == 0:
        return OffloadWatermarks(high, low, per_segment, problem)
    high = max(high, 2)
    per_segment = min(per_segment, high // 2)
    if not 1 <= low <= high - per_segment:
        low = high - per_segment
    return OffloadWatermarks(high, low, per_segment, problem)


def read_offload(client, settings_key: str) -> dict:
    """The offload fields of a stored settings hash (None for absent), for offload_rules."""
    return dict(zip(OFFLOAD_FIELDS, client.hmget(settings_key, OFFLOAD_FIELDS)))


def valid_upload_target(url: str) -> bool:
    return bool(UPLOAD_TARGET_RE.match(url))


@dataclass
class ProjectSettings:
    """What one process caches about a project: its settings as of age ``age``."""

    age: int
    values: dict[str, str]

    @property
    def min_version(self) -> str:
        return self.values.get("min_version", "")

    @property
    def max_multi(self) -> int:
        return int(self.values.get("max_multi") or 100)

    @functools.cached_property
    def extra_parameters(self) -> dict:
        """The extra_parameters setting parsed once per cached settings; {} when unset or
        unreadable (set past validate: it must not fail every claim)."""
        try:
            parsed = orjson.loads(self.values.get("extra_parameters") or "{}")
        except orjson.JSONDecodeError:
            return {}
        if type(parsed) is not dict:
            return {}
        parsed.pop("item_name", None)
        try:
            orjson.dumps(parsed)  # what orjson cannot write would fail every answer
        except orjson.JSONEncodeError:
            return {}
        return parsed

    @classmethod
    def from_redis(cls, values: dict) -> ProjectSettings:
        return cls(int(values.get("settings_age", 0)), with_stored(values))
