"""`tracker admin token ...`: admin tokens, stored hashed and shown once."""

from __future__ import annotations

import click

from tracker_api.cli import errors, output
from tracker_api.cli.root import admin, admin_group, audit


@admin_group.group("token")
def admin_token():
    """Create and revoke admin tokens (stored hashed; shown once)."""


@admin_token.command("create")
@click.option(
    "--scope",
    default="*",
    show_default=True,
    help="'*' for a global admin, or a project name for that project's admin.",
)
@click.option("--note", default="", help="Who or what the token is for.")
@output.json_option
def admin_token_create(scope, note):
    """Create a token and print it once."""
    from tracker_core import tokens

    a = admin()
    text, record = tokens.create(a.r, scope, note)
    audit(a, "token.create", None if record.is_global else scope, token_id=record.token_id, scope=scope)
    output.emit({"token": text, "token_id": record.token_id, "scope": scope})


@admin_token.command("list")
@output.json_option
def admin_token_list():
    """List the tokens (id, scope, note, creation time; never a secret)."""
    from tracker_core import tokens

    output.emit({"tokens": [t.__dict__ for t in tokens.list_tokens(admin().r)]})


@admin_token.command("revoke")
@click.argument("token_id")
@output.json_option
def admin_token_revoke(token_id):
    """Revoke the token with id TOKEN_ID (the part after trk_)."""
    from tracker_core import tokens

    a = admin()
    if not tokens.revoke(a.r, token_id):
        raise errors.Failure(f"no token {token_id!r}")
    audit(a, "token.revoke", token_id=token_id)
    output.emit({"revoked": token_id}, f"revoked {token_id}")
