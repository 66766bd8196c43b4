"""`tracker segments ...`: offloaded segments listed, exported and imported."""

from __future__ import annotations

from pathlib import Path

import click

from tracker_api.cli import output
from tracker_api.cli.root import context, globals_, main, segments_dir_option, slug_command
from tracker_core.admin import segment_verbs


@main.group()
def segments():
    """Offloaded segments of a project: list, export (take out), import (bring in)."""


slug_command(
    segments,
    "list",
    segment_verbs.list_segments,
    "Print SLUG's segments (items, and the queue or done they came from) and the items on their way to one.",
)


@segments.command("export")
@click.argument("slug")
@click.argument("number")
@click.argument("destination", type=click.Path(dir_okay=False))
@segments_dir_option()
def segments_export(slug, number, destination, segments_dir):
    """Move segment NUMBER out of SLUG into DESTINATION (its items leave the project, counted).
    A sharded project's segments are named SHARD:NUMBER, as `segments list` shows."""
    directory = globals_().segments_dir(segments_dir)
    result = segment_verbs.export_file(context(), slug, directory, number, Path(destination))
    output.emit(result, f"exported segment {number} of {slug}: {result['items']} items")


@segments.command("import")
@click.argument("slug")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@segments_dir_option()
@click.option(
    "--queue",
    default="todo",
    help="Queue for the items of a file not exported from SLUG: todo, backfeed, secondary or redo.",
)
def segments_import(slug, source, segments_dir, queue):
    """Bring a segment file into SLUG. One exported from SLUG comes back once, as a segment of the
    queue it left (maintain refills it like any other); any other file, or the same one again, has
    its items added through SLUG's Bloom filter (items SLUG has seen are dropped as duplicates)."""
    directory = globals_().segments_dir(segments_dir)
    result = segment_verbs.import_file(context(), slug, directory, Path(source), queue)
    if result["segment"] is not None:
        text = f"imported {result['items']} items into {slug} as segment {result['segment']}"
    else:
        text = (
            f"imported {result['items']} items into {slug}:{queue} through the Bloom "
            f"filter ({result['duplicates']} duplicates dropped)"
        )
    output.emit(result, text)
