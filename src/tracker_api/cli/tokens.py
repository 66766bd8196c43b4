"""`tracker admin token ...`: admin tokens, stored hashed and shown once."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import admin_group, context, show
from tracker_core.admin import token_verbs


@admin_group.group("token")
def admin_token():
    """Create and revoke admin tokens (stored hashed; shown once)."""


@admin_token.command("create")
@click.option(
    "--scope", default="*", help="'*' for a global admin, or a project name for that project's admin."
)
@click.option("--note", default="", show_default=False, help="Who or what the token is for.")
def admin_token_create(scope, note):
    """Create a token and print it once."""
    show(token_verbs.create, scope, note)


@admin_token.command("list")
def admin_token_list():
    """List the tokens (id, scope, note, creation time; never a secret)."""
    show(token_verbs.list_tokens)


@admin_token.command("revoke")
@click.argument("token_id")
def admin_token_revoke(token_id):
    """Revoke the token with id TOKEN_ID (the part after trk_)."""
    result = token_verbs.revoke(context(), token_id)
    output.emit(result, f"revoked {token_id}")
