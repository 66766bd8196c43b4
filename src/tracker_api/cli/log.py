"""`tracker log ...` (the done, uploads and bad_dones logs) and `tracker admin audit`."""

from __future__ import annotations

import sys

import click

from tracker_api.cli.root import admin_group, context, globals_, main, segments_dir_option, show, slug_command
from tracker_core.admin import log_verbs


@main.group("log")
def log_group():
    """The done log (every completion, archived to segment files by maintain) and the uploads
    and bad_dones logs: export them as JSON lines."""


@log_group.command("export")
@click.argument("slug")
@click.option(
    "--kind", type=click.Choice(["done", "uploads", "bad_dones"]), default="done", help="Which log."
)
@click.option(
    "--since", default=None, help="Entries from this time on: Unix seconds or ISO 8601 (UTC unless given)."
)
@click.option("--downloader", default=None, help="Only this downloader's (uploader's) entries.")
@click.option(
    "--item",
    default=None,
    help="Only the entries that name this item (a segment file that cannot name it is skipped "
    "after a byte search, not decoded).",
)
@segments_dir_option()
def log_export(slug, kind, since, downloader, item, segments_dir):
    """Write SLUG's log to stdout as JSON lines (with or without --json: it is an export), oldest
    first: the segment files, then Redis. Each done entry: entry (stream id), at (ms),
    downloader, ip, items, bytes, domains, version, id."""
    out = sys.stdout.buffer
    directory = globals_().segments_dir(segments_dir)
    try:
        log_verbs.export(context(), slug, directory, out, kind, since, downloader, item)
        out.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()


slug_command(
    log_group,
    "status",
    log_verbs.status,
    "Print what SLUG's done log holds: segments, entries on disk and in Redis, the last archived entry, "
    "and entries the stream's safety bound dropped.",
)


@admin_group.command("audit")
@click.option("--project", default=None, help="This project's log (default: the global one).")
@click.option("--count", default=100, type=click.IntRange(1, 1000), help="Entries on this page.")
@click.option("--before", default=None, help="Continue from the 'next' of the previous page.")
def admin_audit(project, count, before):
    """One page of the audit log, newest first (like GET /api/admin/audit)."""
    show(log_verbs.audit_page, project, count, before)
