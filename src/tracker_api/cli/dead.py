"""`tracker dead ...`: items reclaimed too often, listed and put back."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import QUEUE_HELP, admin, audit, main
from tracker_core.admin import AdminError


@main.group()
def dead():
    """Items reclaimed more than max_reclaims times: list them, put them back."""


@dead.command("list")
@click.argument("slug")
@click.option(
    "--count",
    default=1000,
    show_default=True,
    type=click.IntRange(1, 1000000),
    help="At most this many items.",
)
@output.json_option
def dead_list(slug, count):
    """Print up to COUNT of SLUG's dead items with their history (--json: one object a line)."""
    from tracker_core import operations

    a = admin()
    printed, cursor = 0, 0
    while printed < count:  # HSCAN pages: never the whole hash at once
        page = operations.list_dead(a, slug, cursor, min(1000, count - printed))
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
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@output.json_option
def dead_requeue(slug, names, everything, queue):
    """Put dead items NAMES (or --all) back into a queue with a fresh claim count."""
    from tracker_core import operations

    if everything == bool(names):
        raise click.UsageError("name the items to requeue, or pass --all")
    a = admin()
    moved, cursor = 0, 0
    try:
        if everything:
            while True:  # a page at a time, like the API
                page = operations.requeue_dead_page(a, slug, cursor, 1000, queue)
                moved, cursor = moved + page["requeued"], page["cursor"]
                if cursor == 0:
                    break
        else:
            step = operations.MAX_PAGE
            for start in range(0, len(names), step):
                moved += operations.requeue_dead(a, slug, list(names[start : start + step]), queue)[
                    "requeued"
                ]
    except AdminError as exc:
        if moved:
            audit(a, "dead.requeue", slug, queue=queue, requeued=moved, stopped=str(exc))
        raise
    audit(
        a,
        "dead.requeue",
        slug,
        queue=queue,
        requeued=moved,
        **({"all": True} if everything else {"items": len(names)}),
    )
    output.emit({"requeued": moved}, f"requeued {moved} dead items of {slug}")
