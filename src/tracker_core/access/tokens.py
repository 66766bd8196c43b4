"""Admin tokens: created once, shown once, stored only as a hash; global or for one project.

A token reads ``trk_ID_SECRET``. Redis keeps ``ID -> {sha256 of the token, scope, note, created}``
in one hash, so checking a token is one HGET and a constant-time compare, and a leaked dump of
Redis gives no usable token. The secret has 256 random bits, so a fast hash is enough (a slow
password hash protects low-entropy secrets, which these are not).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass

from tracker_core import keyspace

GLOBAL_SCOPE = "*"
TOKEN_RE = re.compile(r"trk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})\Z")
MAX_NOTE = 200


class TokenError(ValueError):
    """A bad token request (unknown scope, unknown id); the message is one line."""


@dataclass(frozen=True)
class Token:
    token_id: str
    scope: str
    note: str
    created_ms: int

    @property
    def is_global(self) -> bool:
        return self.scope == GLOBAL_SCOPE

    def allows(self, project: str) -> bool:
        return self.is_global or self.scope == project


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(r, scope: str, note: str = "") -> tuple[str, Token]:
    """Make a token for SCOPE ('*' or a project name); return (the token text, its record)."""
    if scope != GLOBAL_SCOPE and not keyspace.valid_project_name(scope):
        raise TokenError(f"bad scope {scope!r}: '*' or a project name")
    if len(note) > MAX_NOTE:
        raise TokenError(f"note too long (at most {MAX_NOTE} characters)")
    token_id = secrets.token_hex(6)
    text = f"trk_{token_id}_{secrets.token_urlsafe(32)}"
    record = Token(token_id, scope, note, int(time.time() * 1000))
    # HSETNX: a (vanishingly unlikely) id collision must not replace another token.
    stored = {"sha256": _digest(text), "scope": scope, "note": note, "created_ms": record.created_ms}
    if not r.hsetnx(keyspace.ADMIN_TOKENS, token_id, json.dumps(stored)):
        return create(r, scope, note)
    return text, record


def verify(r, text: str) -> Token | None:
    """The record of token TEXT, or None when it is malformed, unknown or revoked."""
    match = TOKEN_RE.match(text or "")
    if not match:
        return None
    raw = r.hget(keyspace.ADMIN_TOKENS, match[1])
    if raw is None:
        return None
    stored = json.loads(raw)
    if not hmac.compare_digest(stored["sha256"], _digest(text)):
        return None
    return Token(match[1], stored["scope"], stored.get("note", ""), stored.get("created_ms", 0))


def revoke(r, token_id: str) -> bool:
    """Forget token TOKEN_ID; False when there was no such token."""
    return bool(r.hdel(keyspace.ADMIN_TOKENS, token_id))


def list_tokens(r) -> list[Token]:
    """Every token's record (never the secret: it is not stored)."""
    tokens = []
    for token_id, raw in r.hscan_iter(keyspace.ADMIN_TOKENS):
        stored = json.loads(raw)
        tokens.append(Token(token_id, stored["scope"], stored.get("note", ""), stored.get("created_ms", 0)))
    return sorted(tokens, key=lambda t: t.created_ms)
