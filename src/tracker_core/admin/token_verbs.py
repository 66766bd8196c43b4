"""Admin tokens (tracker_core.access.tokens): created once and shown once, listed, revoked."""

from __future__ import annotations

import re

from tracker_core.access import tokens
from tracker_core.admin import checks
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound

TOKEN_ID_RE = re.compile(r"[0-9a-f]{12}\Z")
MAX_SCOPE_CHARS = 64


def create(ctx: AdminContext, scope: str = tokens.GLOBAL_SCOPE, note: str = "") -> dict:
    """A token for SCOPE ('*': every project; or one project's name), shown only here."""
    checks.text(scope, "scope", MAX_SCOPE_CHARS)
    checks.text(note, "note", tokens.MAX_NOTE, empty_ok=True)
    try:
        text, record = tokens.create(ctx.conn, scope, note)
    except tokens.TokenError as exc:
        raise BadInput(str(exc)) from None
    ctx.audit("token.create", None if record.is_global else scope, token_id=record.token_id, scope=scope)
    return {"token": text, "token_id": record.token_id, "scope": scope}


def list_tokens(ctx: AdminContext) -> dict:
    """Every token's record (id, scope, note, creation time; never a secret: none is kept)."""
    return {"tokens": [t.__dict__ for t in tokens.list_tokens(ctx.conn)]}


def revoke(ctx: AdminContext, token_id) -> dict:
    if type(token_id) is not str or not TOKEN_ID_RE.match(token_id):
        raise BadInput(f"bad token id {str(token_id)[:40]!r}: the 12 hex characters after trk_")
    if not tokens.revoke(ctx.conn, token_id):
        raise NotFound(f"no token {token_id!r}")
    ctx.audit("token.revoke", None, token_id=token_id)
    return {"revoked": token_id}
