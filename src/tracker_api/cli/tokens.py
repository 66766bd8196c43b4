"""`tracker admin token ...`: admin tokens, stored hashed and shown once."""

from __future__ import annotations

import time

import click

from tracker_api.cli import output
from tracker_api.cli.root import admin_group, context, show
from tracker_core.admin import token_verbs


@admin_group.group("token")
def admin_token():
    """Create, list and revoke admin tokens (stored hashed; shown once)."""


@admin_token.command("create")
@click.option(
    "--scope",
    default="*",
    help="'*' for a global admin, or project names separated by commas (at most 20) for those projects.",
)
@click.option("--read-only", is_flag=True, help="The token reads its scope and changes nothing.")
@click.option(
    "--expires",
    default="",
    help="Refuse the token after this: 30d, 12h, 90m, 60s, or an ISO date (UTC); at most 3650 days. "
    "Default: never.",
)
@click.option("--note", default="", show_default=False, help="Who or what the token is for.")
def admin_token_create(scope, read_only, expires, note):
    """Create a token and print it once."""
    show(token_verbs.create, scope, note, read_only, expires)


def _when(ms) -> str | None:
    return None if ms is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


@admin_token.command("list")
def admin_token_list():
    """List the tokens: id, scope, access, note, creation, expiry and last use (written at most
    once a minute per token and server process); never a secret."""
    result = token_verbs.list_tokens(context())
    rows = [
        {
            "token_id": t["token_id"],
            "scope": t["scope"],
            "access": "read-only" if t["read_only"] else "read-write",
            "created": _when(t["created_ms"]),
            "expires": _when(t["expires_ms"]) or "never",
            "last_used": _when(t["last_used_ms"]) or "never",
            "note": t["note"],
        }
        for t in result["tokens"]
    ]
    output.emit(result, output.columns(rows) if rows else "no tokens")


@admin_token.command("revoke")
@click.argument("token_id")
def admin_token_revoke(token_id):
    """Revoke the token with id TOKEN_ID (the part after trk_)."""
    result = token_verbs.revoke(context(), token_id)
    output.emit(result, f"revoked {token_id}")
