"""`tracker items ...`: add items, redo them, say where they are."""

from __future__ import annotations

import os
import sys

import click

from tracker_api.cli import errors, output
from tracker_api.cli.root import QUEUE_HELP, admin, audit, globals_, main
from tracker_core.admin import AdminError

NAMES_FILE = click.File("r", encoding="utf-8", errors="surrogateescape", lazy=False)


@main.group()
def items():
    """Add items, redo them, and say where they are."""


def lines(stream):
    """The item names of STREAM, one a line (blank lines skipped), checked like the API's."""
    from tracker_core import operations

    for number, raw in enumerate(stream, 1):
        name = raw.rstrip("\r\n")
        if name:
            if len(name) > operations.MAX_ITEM_CHARS or "\0" in name:
                raise AdminError(
                    f"line {number}: an item name has 1 to {operations.MAX_ITEM_CHARS} characters and no NUL"
                )
            yield name


@items.command("add")
@click.argument("slug")
@click.argument("source", type=NAMES_FILE)
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@click.option(
    "--batch",
    default=5000,
    show_default=True,
    type=click.IntRange(1, 100000),
    help="Items per script call (one call blocks Redis while it runs).",
)
@output.json_option
def items_add(slug, source, queue, batch):
    """Add one item per line of SOURCE (a file, or - for standard input); print the counts."""
    from tracker_core import operations

    a = admin()
    added = duplicates = 0
    refused: dict = {}  # lines that are not UTF-8: refused one by one, the rest is added
    operations.check_queue(queue)
    size = None
    if source is not sys.stdin and hasattr(source, "fileno"):
        try:
            size = os.fstat(source.fileno()).st_size
        except OSError:
            size = None
    try:
        with click.progressbar(
            length=size or 0, label=f"adding to {slug}:{queue}", file=sys.stderr, show_pos=size is None
        ) as bar:
            batches = a.add_items(slug, lines(source), queue=queue, batch=batch, refused=refused)
            for n_added, n_duplicates in batches:
                added += n_added
                duplicates += n_duplicates
                if size:
                    # Text-mode tell() is disabled while iterating; the byte buffer below knows.
                    bar.pos = min(size, source.buffer.tell())
                    bar.update(0)
                else:
                    bar.update(n_added + n_duplicates)
    except AdminError as exc:
        if added or duplicates:  # earlier batches went in: say so, and audit them
            audit(a, "items.add", slug, queue=queue, added=added, duplicates=duplicates, stopped=str(exc))
            raise errors.Failure(f"{exc} (stopped: {added} items added before it)") from None
        raise
    answer = {"added": added, "duplicates": duplicates}
    if refused:
        answer["refused_not_utf8"] = sum(refused.values())
    audit(a, "items.add", slug, queue=queue, **answer)
    output.emit(answer)


def _add_redo(total: dict, page: dict) -> dict:
    for field in ("requeued", "from_done", "from_seen", "held", "skipped"):
        total[field] = total.get(field, 0) + page[field]
    reasons = total.setdefault("skipped_by_reason", {})
    for reason, n in page["skipped_by_reason"].items():
        reasons[reason] = reasons.get(reason, 0) + n
    return total


@items.command("redo")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option(
    "--file", "source", default=None, type=NAMES_FILE, help="Item names, one a line (- for standard input)."
)
@click.option("--pattern", default=None, help="Redo every done item matching this Redis glob.")
@click.option("--queue", default="redo", show_default=True, help=QUEUE_HELP)
@click.option(
    "--even-if-offloaded",
    is_flag=True,
    help="Queue seen names found nowhere even when the project has segment files "
    "(one may sit in a segment and be served twice).",
)
@output.json_option
def items_redo(slug, names, source, pattern, queue, even_if_offloaded):
    """Re-queue done items, or items the Bloom filter has seen that are nowhere (a bad grab
    script run): NAMES and/or --file, or --pattern over done items. Audited; prints counts."""
    from tracker_core import operations

    if (pattern is not None) == bool(names or source):
        raise click.UsageError("name the items (NAMES or --file), or give --pattern")
    a = admin()
    total: dict = {}
    detail = {"queue": queue, **({"pattern": pattern} if pattern is not None else {})}
    try:
        if pattern is not None:
            cursor = 0
            while True:  # SSCAN pages of done, like the API
                page = operations.redo(
                    a,
                    slug,
                    pattern=pattern,
                    cursor=cursor,
                    limit=5000,
                    queue=queue,
                    even_if_offloaded=even_if_offloaded,
                )
                _add_redo(total, page)
                cursor = page["cursor"]
                if cursor == 0:
                    break
        else:
            given = list(names) + (list(lines(source)) if source is not None else [])
            detail["items"] = len(given)
            for start in range(0, len(given), operations.MAX_PAGE):
                batch = given[start : start + operations.MAX_PAGE]
                _add_redo(
                    total,
                    operations.redo(a, slug, names=batch, queue=queue, even_if_offloaded=even_if_offloaded),
                )
    except AdminError as exc:
        if total.get("requeued"):  # earlier batches went in: audit them
            audit(a, "items.redo", slug, **detail, **total, stopped=str(exc))
        raise
    audit(a, "items.redo", slug, **detail, **total)
    output.emit(total)


def _status_detail(place: dict) -> str:
    if place["status"] == "todo":
        return f"limited:{place['limit']}" if place["queue"] == "limited" else place["queue"]
    if place["status"] == "dead":
        return place["reason"]
    if place["status"] == "offloaded":
        return f"segment (from {place['queue']})"
    return ", ".join(f"maybe {where}" for where in place["maybe"]) or "-"


@items.command("status")
@click.argument("slug")
@click.argument("names", nargs=-1, required=True)
@output.json_option
def items_status(slug, names):
    """Where each item is: todo (queue, limit), out (holder, claims), done, dead, offloaded.

    The same answer as GET /P/items/ITEM.json (--json: one such object a line, with the item's
    name). A name found nowhere prints "-", with "maybe offloaded" when the project has segment
    files (they are not opened)."""
    from tracker_core import operations
    from tracker_core.engine import Engine

    operations.check_items(list(names))
    engine = Engine(globals_().redis_url)
    places = []
    for name in names:
        place = engine.item_place(slug, name)
        if place is None:
            raise AdminError(f"unknown project {slug!r}")
        places.append(place)
    if output.wants_json():
        output.emit_rows({"item": name, **place} for name, place in zip(names, places))
        return
    rows = [
        {
            "status": p["status"] or "-",
            "detail": _status_detail(p),
            "downloader": p["downloader"] or "-",
            "claims": "-" if p["claims"] is None else str(p["claims"]),
            "item": name,
        }
        for name, p in zip(names, places)
    ]
    click.echo(output.columns(rows))
