"""Admin tokens (tracker_core.access.tokens): created once and shown once, listed, revoked."""

from __future__ import annotations

import re

from tracker_core.access import tokens
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.infra import redis_clock

TOKEN_ID_RE = re.compile(r"[0-9a-f]{12}\Z")
MAX_SCOPE_CHARS = tokens.MAX_SCOPE_CHARS
MAX_EXPIRY_CHARS = 40


def create(
    ctx: AdminContext,
    scope: str = tokens.GLOBAL_SCOPE,
    note: str = "",
    read_only: bool = False,
    expires: str | None = None,
) -> dict:
    """A token for SCOPE ('*': every project; or project names separated by commas, at most
    tokens.MAX_SCOPE_PROJECTS), READ_ONLY or not, expiring after EXPIRES (a duration such as
    30d, 12h, 90m, or an ISO date; None or '': never), shown only here."""
    checks.text(scope, "scope", MAX_SCOPE_CHARS)
    checks.text(note, "note", tokens.MAX_NOTE, empty_ok=True)
    checks.flag(read_only, "read_only")
    if expires is not None:
        checks.text(expires, "expires", MAX_EXPIRY_CHARS, empty_ok=True)
    now_ms = redis_clock.now_ms(ctx.conn)
    try:
        expires_ms = tokens.parse_expiry(expires, now_ms)
        text, record = tokens.create(
            ctx.conn, scope, note, read_only=read_only, expires_ms=expires_ms, now_ms=now_ms
        )
    except tokens.TokenError as exc:
        raise BadInput(str(exc)) from None
    # A token for one project is that project's news too; the secret is never recorded.
    project = record.scope if len(record.scopes) == 1 and not record.is_global else None
    ctx.audit(
        "token.create",
        project,
        token_id=record.token_id,
        scope=record.scope,
        read_only=read_only,
        expires_ms=expires_ms,
        note=note,
    )
    return {
        "token": text,
        "token_id": record.token_id,
        "scope": record.scope,
        "read_only": read_only,
        "expires_ms": expires_ms,
    }


def list_tokens(ctx: AdminContext) -> dict:
    """Every token's record (id, scope, note, creation, read-only, expiry, last use; never a
    secret: none is kept)."""
    return {"tokens": [t.public() for t in tokens.list_tokens(ctx.conn)]}


def revoke(ctx: AdminContext, token_id) -> dict:
    if type(token_id) is not str or not TOKEN_ID_RE.match(token_id):
        raise BadInput(f"bad token id {str(token_id)[:40]!r}: the 12 hex characters after trk_")
    if not tokens.revoke(ctx.conn, token_id):
        raise NotFound(f"no token {token_id!r}")
    ctx.audit("token.revoke", None, token_id=token_id)
    return {"revoked": token_id}
