"""`tracker claims ...`: list claims and give them back."""

from __future__ import annotations

import click

from tracker_api.cli.root import main, show
from tracker_core.admin import claim_verbs
from tracker_core.admin.paging import face_cursor


@main.group()
def claims():
    """List and release claims."""


@claims.command("list")
@click.argument("slug")
@click.option(
    "--cursor",
    default="0",
    help="Where to continue: the cursor the last page printed (SHARD:CURSOR on a sharded project).",
)
@click.option("--count", default=100, type=click.IntRange(1, 10000), help="Claims per page (about).")
@click.option("--pattern", default="*", help="Redis glob on item names.")
def claims_list(slug, cursor, count, pattern):
    """One page of claims (continue with the printed cursor until it is 0)."""
    show(claim_verbs.list_claims, slug, face_cursor(cursor), count, pattern)


@claims.command("release")
@click.argument("slug")
@click.option("--downloader", default=None, help="Release the claims this downloader holds.")
@click.option(
    "--older-than",
    "older_than_s",
    default=None,
    type=float,
    help="Release claims older than this, in seconds.",
)
@click.option("--pattern", default=None, help="Release claims of items matching this Redis glob.")
def claims_release(slug, downloader, older_than_s, pattern):
    """Give claims back to todo (one filter), page by page until none is left."""
    show(claim_verbs.release_all, slug, downloader, older_than_s, pattern)
