"""Admin tokens: created once, shown once, stored only as a hash; global, or for a list of
projects; read-write or read-only; with or without an expiry; each with its last use.

A token reads ``trk_ID_SECRET``. Redis keeps ``ID -> {sha256 of the token, scope, note, created}``
in one hash, so checking a token is one HGET and a constant-time compare, and a leaked dump of
Redis gives no usable token. The secret has 256 random bits, so a fast hash is enough (a slow
password hash protects low-entropy secrets, which these are not).

A token of the first shape (one scope, read-write, no expiry) is stored as it always was. A
token with a list of projects, read-only or with an expiry keeps those in ``scopes``,
``read_only`` and ``expires_ms``, and its ``scope`` field reads ``-``, which no project is
named: a node of an earlier release, which knows none of these, refuses it on every project and
global route instead of granting more than it says.

An expired token is refused as an unknown one is (``verify`` answers None for both), by the
"now" the caller passes: Redis's clock (tracker_core.infra.redis_clock), not the node's.

Last use: ``touch`` writes ``ID -> ms`` to a second hash, one HSET, at most once per
``TOUCH_EVERY_MS`` per token in each process, so a token's shown last use is at most a minute
older than its real one and a busy token costs one write a minute per process, not one per
request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from tracker_core import keyspace

GLOBAL_SCOPE = "*"
TOKEN_RE = re.compile(r"trk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})\Z")
MAX_NOTE = 200
MAX_SCOPE_PROJECTS = 20  # projects one token may name
MAX_SCOPE_CHARS = MAX_SCOPE_PROJECTS * 66  # twenty names of 64 and their separators (", ")
MAX_EXPIRY_DAYS = 3650
DAY_MS = 86_400_000
MAX_EXPIRY_MS = MAX_EXPIRY_DAYS * DAY_MS
LEGACY_SCOPE = "-"  # the scope an earlier release reads for a token it must not honour
TOUCH_EVERY_MS = 60_000
TOUCH_MEMORY = 10_000  # token ids a process remembers touching (then it starts over)
DURATION_RE = re.compile(r"([0-9]{1,10})([smhd])\Z")
UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}


class TokenError(ValueError):
    """A bad token request (unknown scope, unknown id); the message is one line."""


@dataclass(frozen=True)
class Token:
    token_id: str
    scope: str  # '*' or the projects, comma-separated
    note: str
    created_ms: int
    read_only: bool = False
    expires_ms: int | None = None
    last_used_ms: int | None = None  # filled by list_tokens only

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.scope.split(","))

    @property
    def is_global(self) -> bool:
        return self.scope == GLOBAL_SCOPE

    def allows(self, project: str) -> bool:
        return self.is_global or project in self.scopes

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms is not None and now_ms >= self.expires_ms

    def public(self) -> dict:
        """What a listing shows (never a secret: none is kept)."""
        return {
            "token_id": self.token_id,
            "scope": self.scope,
            "note": self.note,
            "created_ms": self.created_ms,
            "read_only": self.read_only,
            "expires_ms": self.expires_ms,
            "last_used_ms": self.last_used_ms,
        }


def parse_scope(text: str) -> str:
    """TEXT ('*', or project names separated by commas) as a token stores it: '*' or the names
    in the order given, each once; TokenError for anything else."""
    if text.strip() == GLOBAL_SCOPE:
        return GLOBAL_SCOPE
    names = list(dict.fromkeys(part.strip() for part in text.split(",")))
    if len(names) > MAX_SCOPE_PROJECTS:
        raise TokenError(f"scope names {len(names)} projects: at most {MAX_SCOPE_PROJECTS}")
    for name in names:
        if not keyspace.valid_project_name(name):
            raise TokenError(f"bad scope {name[:80]!r}: '*' or project names separated by commas")
    return ",".join(names)


def parse_expiry(text: str | None, now_ms: int) -> int | None:
    """When a token given --expires TEXT expires (ms), from NOW_MS: a duration (90m, 12h, 30d,
    3600s) or an ISO 8601 date or time (UTC unless it names its offset); None for no expiry.
    TokenError for anything else, or for a time not after NOW_MS or more than MAX_EXPIRY_DAYS
    after it."""
    if text is None or not text.strip():
        return None
    text = text.strip()
    duration = DURATION_RE.match(text)
    if duration:
        expires_ms = now_ms + int(duration[1]) * UNIT_MS[duration[2]]
    else:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise TokenError(
                f"bad expiry {text[:40]!r}: a duration (90m, 12h, 30d) or an ISO date (2030-01-31)"
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        expires_ms = int(when.timestamp() * 1000)
    if expires_ms <= now_ms:
        raise TokenError(f"expiry {text[:40]!r} is not in the future")
    if expires_ms - now_ms > MAX_EXPIRY_MS:
        raise TokenError(f"expiry {text[:40]!r} is more than {MAX_EXPIRY_DAYS} days away")
    return expires_ms


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(
    r,
    scope: str,
    note: str = "",
    *,
    read_only: bool = False,
    expires_ms: int | None = None,
    now_ms: int | None = None,
) -> tuple[str, Token]:
    """Make a token for SCOPE ('*', or project names separated by commas), READ_ONLY or not,
    expiring at EXPIRES_MS (None: never); return (the token text, its record). NOW_MS is the
    creation time (Redis's TIME when None). EXPIRES_MS is taken as given (parse_expiry bounds
    what a face passes; a test makes one that has expired)."""
    scope = parse_scope(scope)
    if len(note) > MAX_NOTE:
        raise TokenError(f"note too long (at most {MAX_NOTE} characters)")
    created_ms = _redis_now_ms(r) if now_ms is None else now_ms
    token_id = secrets.token_hex(6)
    text = f"trk_{token_id}_{secrets.token_urlsafe(32)}"
    record = Token(token_id, scope, note, created_ms, read_only, expires_ms)
    stored: dict = {"sha256": _digest(text), "scope": scope, "note": note, "created_ms": created_ms}
    if "," in scope or read_only or expires_ms is not None:
        stored.update(scope=LEGACY_SCOPE, scopes=scope.split(","), read_only=read_only, expires_ms=expires_ms)
    # HSETNX: a (vanishingly unlikely) id collision must not replace another token.
    if not r.hsetnx(keyspace.ADMIN_TOKENS, token_id, json.dumps(stored)):
        return create(r, scope, note, read_only=read_only, expires_ms=expires_ms, now_ms=created_ms)
    return text, record


def _record(token_id: str, stored: dict) -> Token:
    scopes = stored.get("scopes")
    return Token(
        token_id,
        ",".join(scopes) if scopes else stored["scope"],
        stored.get("note", ""),
        stored.get("created_ms", 0),
        bool(stored.get("read_only", False)),
        stored.get("expires_ms"),
    )


def _redis_now_ms(r) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def verify(r, text: str, now_ms: int | None = None) -> Token | None:
    """The record of token TEXT, or None when it is malformed, unknown, revoked or expired at
    NOW_MS (Redis's TIME when None and the token has an expiry)."""
    match = TOKEN_RE.match(text or "")
    if not match:
        return None
    raw = r.hget(keyspace.ADMIN_TOKENS, match[1])
    if raw is None:
        return None
    stored = json.loads(raw)
    if not hmac.compare_digest(stored["sha256"], _digest(text)):
        return None
    token = _record(match[1], stored)
    if token.expires_ms is not None and token.expired(_redis_now_ms(r) if now_ms is None else now_ms):
        return None
    return token


# token id -> when this process last wrote its last use (ms): the throttle of touch.
_touched: dict[str, int] = {}


def touch(r, token_id: str, now_ms: int) -> bool:
    """Record that TOKEN_ID was used at NOW_MS, unless this process did so less than
    TOUCH_EVERY_MS before; True when it wrote (one HSET)."""
    last = _touched.get(token_id)
    if last is not None and 0 <= now_ms - last < TOUCH_EVERY_MS:
        return False
    if len(_touched) >= TOUCH_MEMORY:
        _touched.clear()
    _touched[token_id] = now_ms
    r.hset(keyspace.ADMIN_TOKENS_USED, token_id, now_ms)
    return True


def revoke(r, token_id: str) -> bool:
    """Forget token TOKEN_ID; False when there was no such token."""
    gone = bool(r.hdel(keyspace.ADMIN_TOKENS, token_id))
    # Its last use goes after it (a use checked just before the revoke may write it back: a
    # field no listing shows, at most one per revoked token).
    r.hdel(keyspace.ADMIN_TOKENS_USED, token_id)
    return gone


def list_tokens(r) -> list[Token]:
    """Every token's record with its last use (never the secret: it is not stored)."""
    used = r.hgetall(keyspace.ADMIN_TOKENS_USED)
    tokens = []
    for token_id, raw in r.hscan_iter(keyspace.ADMIN_TOKENS):
        last = used.get(token_id)
        record = _record(token_id, json.loads(raw))
        tokens.append(record if last is None else replace(record, last_used_ms=int(last)))
    return sorted(tokens, key=lambda t: t.created_ms)
