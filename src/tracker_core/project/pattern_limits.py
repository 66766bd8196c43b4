"""Pattern and item-type limits of a project: validate, store, list, remove, compile.

A limit is a name, a pattern (see classify: `type:`, `prefix:`, `domain:`, `regex:`) and a rate
shared by every item that matches (`10/s`, `30/m`; a bare number is per second). Limits live in
the project's `limits` hash; each change goes through the set_limit script, which bumps the
settings age, so every node reloads its compiled pattern set on its next request.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass

from tracker_core import keyspace, scripts
from tracker_core.compiled.classify import Classifier, PatternError, parse_pattern
from tracker_core.scripts.projects import SetLimitCodes

log = logging.getLogger(__name__)
LIMIT_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")
RATE_RE = re.compile(r"(?P<count>[0-9]+(?:\.[0-9]+)?)(?:/(?P<unit>s|m))?\Z")
MAX_RATE_PER_S = 1_000_000.0
MAX_LIMITS = 5000
SET_LIMIT_ERRORS = {
    scripts.set_limit.codes.UNKNOWN_PROJECT: "unknown project {project!r}",
    scripts.set_limit.codes.UNKNOWN_LIMIT: "unknown limit {name!r}",
    scripts.set_limit.codes.TOO_MANY: f"too many limits (at most {MAX_LIMITS})",
}


class LimitError(ValueError):
    """A bad limit request; the message is one line for the admin. CODE is the set-limit
    script's refusal (scripts.set_limit.codes), None for a request refused before any call."""

    def __init__(self, message: str, code: SetLimitCodes | None = None):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Limit:
    name: str
    pattern: str
    rate: str
    rate_per_s: float
    seq: int

    def as_dict(self) -> dict:
        return asdict(self)


def parse_rate(rate: str) -> tuple[str, float]:
    """Turn `10/s`, `30/m` or `10` into (normalised text, items per second)."""
    match = RATE_RE.match(str(rate).strip())
    if not match:
        raise LimitError(f"bad rate {rate!r}: use N/s or N/m (N > 0)")
    count = float(match["count"])
    unit = match["unit"] or "s"
    per_s = count if unit == "s" else count / 60.0
    if not 0 < per_s <= MAX_RATE_PER_S:
        raise LimitError(f"bad rate {rate!r}: must be above 0 and at most {MAX_RATE_PER_S:.0f}/s")
    text = f"{int(count) if count == int(count) else count}/{unit}"
    return text, per_s


def check_name(name: str) -> str:
    if not isinstance(name, str) or not LIMIT_NAME_RE.match(name):
        raise LimitError(f"bad limit name {name!r}: use a-z, 0-9, '.', '-' and '_' (at most 64)")
    return name


def check_pattern(pattern: str) -> str:
    try:
        kind, value = parse_pattern(pattern)
    except PatternError as exc:
        raise LimitError(str(exc)) from None
    return f"{kind}:{value}"


def usable_pattern(pattern: str) -> str | None:
    """PATTERN when the classifier can compile it, else None (it then matches nothing)."""
    try:
        parse_pattern(pattern)
    except PatternError:
        return None
    return pattern


def _refusal(pattern: str) -> str:
    try:
        parse_pattern(pattern)
    except PatternError as exc:
        return f"{pattern!r}: {exc}"
    return ""


def _run(client, k: keyspace.ProjectKeys, op: str, name: str, record: str = "") -> int:
    age = scripts.set_limit(
        client, k, channel=keyspace.SETTINGS_CHANNEL, op=op, name=name, record=record, max_limits=MAX_LIMITS
    )
    if age < 0:
        code = scripts.set_limit.codes(age)
        raise LimitError(SET_LIMIT_ERRORS[code].format(project=k.project, name=name), code)
    return age


def add(client, k: keyspace.ProjectKeys, name: str, pattern: str, rate: str) -> int:
    """Add or replace limit NAME; return the new settings age."""
    check_name(name)
    pattern = check_pattern(pattern)
    rate_text, per_s = parse_rate(rate)
    record = json.dumps({"pattern": pattern, "rate": rate_text, "rate_per_s": per_s})
    return _run(client, k, "set", name, record)


def remove(client, k: keyspace.ProjectKeys, name: str) -> int:
    """Remove limit NAME; return the new settings age. A name no limit can have is an unknown
    limit, as a name no limit has."""
    try:
        check_name(name)
    except LimitError:
        code = scripts.set_limit.codes.UNKNOWN_LIMIT
        raise LimitError(SET_LIMIT_ERRORS[code].format(project=k.project, name=name), code) from None
    return _run(client, k, "remove", name)


def from_hash(values: dict) -> list[Limit]:
    """Decode the limits hash into limits in classification order (oldest first)."""
    limits = []
    for name, raw in values.items():
        record = json.loads(raw)
        limits.append(
            Limit(name, record["pattern"], record["rate"], float(record["rate_per_s"]), int(record["seq"]))
        )
    return sorted(limits, key=lambda limit: limit.seq)


def load(client, k: keyspace.ProjectKeys) -> list[Limit]:
    """Read a project's limits, in classification order."""
    return from_hash(client.hgetall(k.limits))


class CompiledLimits:
    """A project's limits with their compiled classifier: name_of(item) -> limit name or None.

    A stored pattern that can no longer be compiled (a regex added before regexes ran on RE2,
    using syntax it refuses) matches nothing and is listed in `unusable`, rather than failing
    every request of the project; the admin replaces it (`limit add` says why it is refused).
    """

    def __init__(self, limits: list[Limit]):
        self.limits = limits
        patterns = [usable_pattern(limit.pattern) for limit in limits]
        self.unusable = [limit.name for limit, p in zip(limits, patterns) if p is None]
        if self.unusable:
            log.warning(
                "limits %s cannot be used (matching nothing): %s",
                self.unusable,
                "; ".join(_refusal(limit.pattern) for limit in limits if limit.name in self.unusable),
            )
        self.classifier = Classifier(patterns)

    def name_of(self, item: str) -> str | None:
        index = self.classifier.classify(item)
        return None if index < 0 else self.limits[index].name

    def names_of(self, items: list[str]) -> list:
        return [None if i < 0 else self.limits[i].name for i in self.classifier.classify_many(items)]


wire = scripts.wire  # callers that classify names also send them


def held_entry(limit: str, entry):
    """The member of the held zset (and its way-in set) for ENTRY held by LIMIT: "LIMIT\\0ENTRY".

    ENTRY may be bytes (a backfeed body's item) or text; the result has the same type.
    """
    if isinstance(entry, bytes):
        return limit.encode() + b"\0" + entry
    return f"{limit}\0{entry}"


def split_entries(
    entries: list, dedup_keys: list, limit_names: list, target, k: keyspace.ProjectKeys
) -> list:
    """Split a batch into (entries, dedup keys, target) groups: free items, then held ones.

    LIMIT_NAMES (one per item, None when no limit matches) come from classifying the dedup keys,
    so copies of one key always land in the same group and the Bloom filter still dedups them
    within the batch. Held items go to the way-in set as "LIMIT\\0ENTRY" (see hold_new), keyed in
    the filter by their dedup key like free ones.
    """
    free, free_keys, held, held_keys = [], [], [], []
    for entry, key, limit in zip(entries, dedup_keys, limit_names):
        if limit is None:
            free.append(entry)
            free_keys.append(key)
        else:
            held.append(held_entry(limit, entry))
            held_keys.append(key)
    groups = [(free, free_keys, target)] if free else []
    if held:
        groups.append((held, held_keys, k.limited_in))
    return groups


def held_entries(compiled: CompiledLimits | None, names: list[str]) -> list[str]:
    """Per name, "LIMIT\\0NAME" when one of the limits matches it, else '' (script arguments).

    Used where items go back into a shared queue (release, requeue of dead items, queue moves):
    the script files the held ones in the way-in set instead of the queue.
    """
    if compiled is None or not compiled.limits:
        return [""] * len(names)
    return [
        "" if limit is None else held_entry(limit, name)
        for name, limit in zip(names, compiled.names_of(names))
    ]


def current(client, k: keyspace.ProjectKeys) -> tuple[str, CompiledLimits]:
    """(settings age, compiled limits) read fresh; the age is read first, so a script that
    compares it with the project's age refuses whenever the limits may have changed since."""
    age = client.hget(k.settings, "settings_age")
    return ("" if age is None else str(age)), CompiledLimits(load(client, k))


HOLD_BATCH = 5000
STALE_AGE = scripts.release.codes.STALE_AGE  # classified at another settings age (release, redo)


def hold_new(client, k: keyspace.ProjectKeys) -> int:
    """Move held items from their way-in set into the held zset; return how many moved."""
    moved = 0
    while True:
        n = scripts.hold_limited(client, k, most=HOLD_BATCH)
        moved += n
        if n < HOLD_BATCH:
            return moved


def reclassify(client, k: keyspace.ProjectKeys, batch: int = 1000) -> int:
    """Hold the queued items that the project's current limits match; return how many moved.

    Run after limits change (and by maintenance): items queued before a limit existed, or by a
    node that had not yet seen the change, then wait in the limit's sub-queue like newly added
    ones. (Every way in classifies: add, backfeed, release, requeue of dead items, queue moves.)
    It also files held items that a crash left in the way-in set between a script and hold_new.
    """
    compiled = CompiledLimits(load(client, k))
    moved = 0
    for queue in k.shared_queues() if compiled.limits else ():
        cursor = 0
        while True:
            cursor, names = client.sscan(queue, cursor, count=batch)
            matched = [(n, limit) for n, limit in zip(names, compiled.names_of(names)) if limit is not None]
            if matched:
                moved += scripts.hold_queued(
                    client,
                    k,
                    queue=queue,
                    items=[n for n, _ in matched],
                    held=[held_entry(limit, wire(n)) for n, limit in matched],
                )
            if int(cursor) == 0:
                break
    hold_new(client, k)
    return moved
