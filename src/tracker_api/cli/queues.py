"""`tracker queue ...`: count, sample, clear and move items between queues."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import admin, audit, main, operation


@main.group()
def queue():
    """Count, sample, clear and move items between queues."""


@queue.command("count")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@output.json_option
def queue_count(slug, name):
    """Print how many items QUEUE of SLUG holds."""
    from tracker_core import operations

    operation("", slug, operations.count, slug, name)


@queue.command("sample")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option(
    "--count", default=20, show_default=True, type=click.IntRange(1, 1000), help="How many items to show."
)
@output.json_option
def queue_sample(slug, name, count):
    """Print up to COUNT items of QUEUE (any, not the next to be served)."""
    from tracker_core import operations

    operation("", slug, operations.sample, slug, name, count)


@queue.command("clear")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option("--yes", is_flag=True, help="Really drop every item of the queue.")
@output.json_option
def queue_clear(slug, name, yes):
    """Drop every item of QUEUE."""
    from tracker_core import operations

    if not yes:
        raise click.UsageError("clearing drops the queue's items: add --yes")
    operation("queue.clear", slug, lambda a, p, q: {"dropped": operations.clear(a, p, q)}, slug, name)


@queue.command("move")
@click.argument("slug")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.option("--pattern", default="*", show_default=True, help="Redis glob on item names.")
@output.json_option
def queue_move(slug, source, target, pattern):
    """Move matching items FROM one queue TO another, page by page until done."""
    from tracker_core import operations

    a = admin()
    moved, cursor = 0, 0
    while True:
        page = operations.move(a, slug, source, target, pattern, cursor, limit=5000)
        moved, cursor = moved + page["moved"], page["cursor"]
        if cursor == 0:
            break
    audit(a, "queue.move", slug, source=source, target=target, pattern=pattern, moved=moved)
    output.emit({"moved": moved})
