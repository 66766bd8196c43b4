"""`tracker queue ...`: count, sample, clear and move items between queues."""

from __future__ import annotations

import click

from tracker_api.cli.root import main, show
from tracker_core.admin import item_verbs


@main.group()
def queue():
    """Count, sample, clear and move items between queues (QUEUE: todo, secondary, backfeed,
    redo or downloader:NAME)."""


@queue.command("count")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
def queue_count(slug, name):
    """Print how many items QUEUE of SLUG holds."""
    show(item_verbs.count, slug, name)


@queue.command("sample")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option("--count", default=20, type=click.IntRange(1, 1000), help="How many items to show.")
def queue_sample(slug, name, count):
    """Print up to COUNT items of QUEUE (any, not the next to be served)."""
    show(item_verbs.sample, slug, name, count)


@queue.command("clear")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option("--yes", is_flag=True, help="Really drop every item of the queue.")
def queue_clear(slug, name, yes):
    """Drop every item of QUEUE."""
    if not yes:
        raise click.UsageError("clearing drops the queue's items: add --yes")
    show(item_verbs.clear, slug, name)


@queue.command("move")
@click.argument("slug")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.option("--pattern", default="*", help="Redis glob on item names.")
def queue_move(slug, source, target, pattern):
    """Move matching items FROM one queue TO another, page by page until done."""
    show(item_verbs.move_all, slug, source, target, pattern)
