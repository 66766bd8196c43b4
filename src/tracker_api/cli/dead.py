"""`tracker dead ...`: items reclaimed too often, listed and put back."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import QUEUE_HELP, context, main
from tracker_core.admin import checks, dead_verbs


@main.group()
def dead():
    """Items reclaimed more than max_reclaims times: list them, put them back."""


@dead.command("list")
@click.argument("slug")
@click.option("--count", default=1000, type=click.IntRange(1, 1000000), help="At most this many items.")
def dead_list(slug, count):
    """Print up to COUNT of SLUG's dead items with their history (--json: one object a line)."""
    ctx = context()
    printed, cursor = 0, 0
    while printed < count:  # HSCAN pages, printed as they come: never the whole hash at once
        page = dead_verbs.list_dead(ctx, slug, cursor, min(1000, count - printed))
        entries = page["dead"][: count - printed]
        output.emit_rows(entries)
        printed += len(entries)
        cursor = page["cursor"]
        if cursor == 0:
            break


@dead.command("requeue")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Requeue every dead item.")
@click.option("--queue", default="todo", help=QUEUE_HELP)
def dead_requeue(slug, names, everything, queue):
    """Put dead items NAMES (or --all) back into a queue with a fresh claim count."""
    if everything == bool(names):
        raise click.UsageError("name the items to requeue, or pass --all")
    ctx = context()
    if everything:
        result = dead_verbs.requeue_all(ctx, slug, queue)
    else:
        moved = 0
        for start in range(0, len(names), checks.MAX_PAGE):
            moved += dead_verbs.requeue(ctx, slug, list(names[start : start + checks.MAX_PAGE]), queue)[
                "requeued"
            ]
        result = {"requeued": moved}
    output.emit(result, f"requeued {result['requeued']} dead items of {slug}")
