"""`tracker items ...`: add items, redo them, say where they are."""

from __future__ import annotations

import os
import stat
import sys
import time

import click

from tracker_api.cli import output
from tracker_api.cli.progress import Progress
from tracker_api.cli.root import QUEUE_HELP, context, globals_, main, segments_dir_option
from tracker_core.admin import item_verbs

NAMES_FILE = click.File("r", encoding="utf-8", errors="surrogateescape", lazy=False)


@main.group()
def items():
    """Add items, redo them, and say where they are."""


def lines(stream):
    """The lines of STREAM without their line ends (the verbs skip empty ones and count the
    rest, so a refusal names the line)."""
    return (raw.rstrip("\r\n") for raw in stream)


@items.command("add")
@click.argument("slug")
@click.argument("source", type=NAMES_FILE)
@click.option("--queue", default="todo", help=QUEUE_HELP)
@click.option(
    "--batch",
    default=5000,
    type=click.IntRange(1, 100000),
    help="Items per script call (one call blocks Redis while it runs).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show progress on stderr: bytes of a file, items and rate from stdin, items/s at the "
    "end. Default: when stderr is a terminal.",
)
def items_add(slug, source, queue, batch, progress):
    """Add one item per line of SOURCE (a file, or - for standard input); print the counts."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        output.emit(item_verbs.add(context(), slug, lines(source), queue=queue, batch=batch))
        return
    with Progress(sys.stderr, f"{slug}:{queue}", _size_bytes(source), _bytes_read(source)) as shown:
        # From the first batch on: a refusal before it is the only line printed.
        answer = item_verbs.add(
            context(), slug, lines(source), queue=queue, batch=batch,
            progress=lambda added, duplicates: shown.update(added + duplicates),
        )  # fmt: skip
        shown.finish()
    output.emit(answer)


def _size_bytes(source) -> int | None:
    """The size of SOURCE when it is a regular file (a pipe or terminal has none)."""
    try:
        info = os.fstat(source.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _bytes_read(source):
    """How many bytes of SOURCE were read so far (text-mode tell() is disabled while iterating;
    the byte buffer under it knows)."""
    buffer = getattr(source, "buffer", None)
    return buffer.tell if buffer is not None and buffer.seekable() else None


@items.command("redo")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option(
    "--file", "source", default=None, type=NAMES_FILE, help="Item names, one a line (- for standard input)."
)
@click.option("--pattern", default=None, help="Redo every done item matching this Redis glob.")
@click.option("--queue", default="redo", help=QUEUE_HELP)
@click.option(
    "--even-if-offloaded",
    is_flag=True,
    help="Queue seen names found nowhere even when the project has segment files "
    "(one may sit in a segment and be served twice).",
)
def items_redo(slug, names, source, pattern, queue, even_if_offloaded):
    """Re-queue done items, or items the Bloom filter has seen that are nowhere (a bad grab
    script run): NAMES and/or --file, or --pattern over done items. Audited; prints counts."""
    if (pattern is not None) == bool(names or source):
        raise click.UsageError("name the items (NAMES or --file), or give --pattern")
    given = None
    if pattern is None:
        given = list(names) + ([n for n in lines(source) if n] if source is not None else [])
    output.emit(
        item_verbs.redo_all(
            context(), slug, names=given, pattern=pattern, queue=queue, even_if_offloaded=even_if_offloaded
        )
    )


def _status_detail(place: dict) -> str:
    if place["status"] == "todo":
        return f"limited:{place['limit']}" if place["queue"] == "limited" else place["queue"]
    if place["status"] == "dead":
        return place["reason"]
    if place["status"] == "offloaded":
        where = "staged" if place["segment"] is None else f"segment {place['segment']}"
        return f"{where} (returns to {place['queue']})" if place["queue"] != "done" else f"{where} (done)"
    return ", ".join(f"maybe {where}" for where in place["maybe"]) or "-"


def _last_done(story: dict) -> str:
    """The newest done of the item: who, when (UTC), bytes of its entry; "-" when none."""
    if not story["done"]:
        return "-"
    last = story["done"][-1]
    at = last["at"]  # an int as the done script writes it; anything else (hand-made) is not shown
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at / 1000)) if type(at) is int else "?"
    more = f" (+{len(story['done']) - 1})" if len(story["done"]) > 1 else ""
    return f"{last['downloader']},{when},{last['bytes']}B{more}"


@items.command("status")
@click.argument("slug")
@click.argument("names", nargs=-1, required=True)
@click.option(
    "--public",
    is_flag=True,
    help="Only the public answer of GET /P/items/ITEM.json: Redis alone, no file read, no IP "
    "(any number of names, at once).",
)
@segments_dir_option()
def items_status(slug, names, public, segments_dir):
    """Where each item is and what happened to it: todo (queue, limit), out (holder, claims,
    IP), done (who, when, bytes: every done in the done log, archived files included), dead
    (its rounds), offloaded (the segment file that holds it: every segment file is searched).

    --json: one object a line, the public answer of GET /P/items/ITEM.json with what only
    admins see (ip, rounds, limit_rule, done, seen, unread) and the item's name. At most 100
    names; they share one pass over the segment files and the done log."""
    if public:
        places = item_verbs.status(context(), slug, list(names))
    else:
        places = item_verbs.story(context(), slug, globals_().segments_dir(segments_dir), list(names))
    if output.wants_json():
        output.emit_rows(places)
        return
    rows = [
        {
            "status": p["status"] or "-",
            "detail": _status_detail(p),
            "downloader": p["downloader"] or "-",
            "claims": "-" if p["claims"] is None else str(p["claims"]),
            **({} if public else {"done": _last_done(p)}),
            "item": p["item"],
        }
        for p in places
    ]
    click.echo(output.columns(rows))
    for line in [] if public else places[0]["unread"]:  # the same for every name: said once
        click.echo(f"not read here: {line}", err=True)
