"""The webhooks an admin adds: each a URL, an optional project, the events it wants and the
secret that signs its deliveries, stored in one hash (keyspace.NOTIFY_HOOKS) and changed only
through notify_hooks-2.lua, which holds their number to MAX_HOOKS.

The secret is generated here, shown once by the verb that adds the hook, and kept (the
deliverer signs with it); listings never show it.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from tracker_core import keyspace, scripts

EVENTS = (
    "project.drained",
    "project.paused",
    "project.resumed",
    "backlog.growing",
    "refill.stalled",
    "offload.stuck",
    "redis.failover",
    "clock.off",
)
# Events of the whole deployment (no project): only hooks without a project receive them.
GLOBAL_EVENTS = frozenset({"redis.failover", "clock.off"})
MAX_HOOKS = 100
MAX_URL_CHARS = 2000
HOOK_ID_RE = re.compile(r"[0-9a-f]{12}\Z")
FIGURES = ("delivered", "failures", "dropped", "last_status", "last_ms")


class HookError(ValueError):
    """A hook refused, with the one-line reason (the admin verb answers it as BadInput)."""


@dataclass(frozen=True)
class Hook:
    hook_id: str
    url: str
    project: str | None
    events: tuple[str, ...]
    created_ms: int
    secret: str

    def wants(self, event: str, project: str | None) -> bool:
        """Whether this hook receives EVENT of PROJECT (None: a deployment's event)."""
        if event not in self.events:
            return False
        return self.project is None or self.project == project

    def public(self) -> dict:
        """The record as listings show it: everything but the secret."""
        shown = asdict(self)
        del shown["secret"]
        shown["events"] = list(self.events)
        return shown

    @classmethod
    def parse(cls, hook_id: str, text: str) -> Hook | None:
        try:
            d = json.loads(text)
            return cls(hook_id, d["url"], d["project"], tuple(d["events"]), int(d["created_ms"]), d["secret"])
        except (ValueError, KeyError, TypeError):
            return None  # a record written by hand: skipped, as if absent


def check_url(url) -> str:
    """URL if a receiver can be POSTed there: http or https, a host, at most MAX_URL_CHARS, no
    user or password (the signature authenticates the tracker), no fragment, no spaces."""
    if type(url) is not str or not url:
        raise HookError("'url' must be a non-empty string")
    if len(url) > MAX_URL_CHARS:
        raise HookError(f"'url' must be at most {MAX_URL_CHARS} characters")
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise HookError("'url' must be ASCII without spaces (percent-encode the rest)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number or out of range
    except ValueError as exc:
        raise HookError(f"bad url: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise HookError("'url' must start with http:// or https://")
    if not parts.hostname:
        raise HookError("'url' must name a host")
    if "@" in parts.netloc:
        raise HookError("'url' must not hold a user or password: the signature authenticates the tracker")
    if parts.fragment or url.endswith("#"):
        raise HookError("'url' must not hold a fragment (#...)")
    return url


def check_events(events, project: str | None) -> tuple[str, ...]:
    """EVENTS (a list of names; None or empty: every event the hook can receive), checked."""
    allowed = [e for e in EVENTS if project is None or e not in GLOBAL_EVENTS]
    if events is None or events == []:
        return tuple(allowed)
    if type(events) is not list or not all(type(e) is str for e in events):
        raise HookError("'events' must be a list of event names")
    for event in events:
        if event not in EVENTS:
            raise HookError(f"unknown event {event[:40]!r} (known: {', '.join(EVENTS)})")
        if event not in allowed:
            raise HookError(f"{event} is a deployment's event: only a hook without a project gets it")
    return tuple(e for e in EVENTS if e in events)  # in EVENTS' order, each once


def add(conn, url: str, project: str | None, events: tuple[str, ...], now_ms: int) -> Hook:
    """Store a new hook with a new secret; HookError when MAX_HOOKS exist already."""
    hook = Hook(secrets.token_hex(6), url, project, events, now_ms, "whsec_" + secrets.token_urlsafe(32))
    record = {k: v for k, v in asdict(hook).items() if k != "hook_id"}
    reply = scripts.notify_hooks(
        conn, op="add", hook_id=hook.hook_id, record=json.dumps(record), max_hooks=MAX_HOOKS
    )
    if reply == scripts.notify_hooks.codes.FULL:
        raise HookError(f"there are {MAX_HOOKS} webhooks already (the most there may be): remove one first")
    if reply != scripts.notify_hooks.codes.DONE:  # 48 random bits met an existing id
        raise HookError("the new hook's id was taken; try again")
    return hook


def remove(conn, hook_id: str) -> bool:
    return scripts.notify_hooks(conn, op="remove", hook_id=hook_id) == scripts.notify_hooks.codes.DONE


def every_hook(conn) -> list[Hook]:
    """Every stored hook, oldest first."""
    found = (Hook.parse(i, text) for i, text in conn.hgetall(keyspace.NOTIFY_HOOKS).items())
    return sorted((h for h in found if h is not None), key=lambda h: (h.created_ms, h.hook_id))


def get(conn, hook_id: str) -> Hook | None:
    text = conn.hget(keyspace.NOTIFY_HOOKS, hook_id)
    return None if text is None else Hook.parse(hook_id, text)


def figures(conn, hooks: list[Hook]) -> dict[str, dict]:
    """Each hook's delivery figures: delivered, failures (failed attempts), dropped (deliveries
    given up), last_status and last_ms (of the last attempt; None before any)."""
    if not hooks:
        return {}
    fields = [f"{h.hook_id}:{name}" for h in hooks for name in FIGURES]
    values = iter(conn.hmget(keyspace.NOTIFY_HOOK_STATS, fields))
    shown = {}
    for hook in hooks:
        row = dict(zip(FIGURES, [next(values) for _ in FIGURES]))
        for name in ("delivered", "failures", "dropped"):
            row[name] = int(row[name] or 0)
        row["last_ms"] = int(row["last_ms"]) if row["last_ms"] else None
        shown[hook.hook_id] = row
    return shown
