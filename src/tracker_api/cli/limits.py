"""`tracker limit ...` (pattern and item-type limits) and `tracker block` (blocks)."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import context, main, show
from tracker_core.admin import limit_verbs


@main.group()
def limit():
    """Pattern and item-type limits: items that match share one rate."""


@limit.command("add")
@click.argument("slug")
@click.argument("name")
@click.argument("pattern")
@click.argument("rate")
@click.option(
    "--no-reclassify",
    is_flag=True,
    help="Leave queued items where they are (maintain holds them on its next pass).",
)
def limit_add(slug, name, pattern, rate, no_reclassify):
    """Add or replace limit NAME: PATTERN is type:T, prefix:P, domain:D or regex:R; RATE N/s or N/m."""
    result = limit_verbs.add(context(), slug, name, pattern, rate, reclassify=not no_reclassify)
    output.emit(result, f"limit {name} of {slug} set; settings now at age {result['settings_age']}")


@limit.command("reclassify")
@click.argument("slug")
def limit_reclassify(slug):
    """Move queued items that a limit matches (added before it, or released) to its sub-queue."""
    result = limit_verbs.reclassify(context(), slug)
    output.emit(result, f"held {result['held']} queued items of {slug}")


@limit.command("remove")
@click.argument("slug")
@click.argument("name")
def limit_remove(slug, name):
    """Remove limit NAME."""
    result = limit_verbs.remove(context(), slug, name)
    output.emit(result, f"limit {name} of {slug} removed; settings now at age {result['settings_age']}")


@limit.command("list")
@click.argument("slug")
def limit_list(slug):
    """List SLUG's limits in classification order (the first match wins)."""
    show(limit_verbs.list_limits, slug)


@main.command()
@click.argument("entry", required=False)
@click.option("--project", default=None, help="Block in this project only (default: all).")
@click.option("--remove", is_flag=True, help="Lift the block.")
@click.option(
    "--list", "list_", is_flag=True, help="Print the global blocks, or with --project the project's."
)
@click.option(
    "--reindex", is_flag=True, help="Rebuild every project's block index (after an upgrade or a repair)."
)
def block(entry, project, remove, list_, reindex):
    """Block ip:ADDRESS, ip:CIDR (10.0.0.0/8, 2001:db8::/32) or name:DOWNLOADER (403 on request).

    A project's own block and a global block of the same entry are kept apart: lifting one
    leaves the other. Projects with ignore_global_blocked=1 see only their own blocks.
    """
    if list_ or reindex:
        if entry is not None or remove or (reindex and (list_ or project)):
            raise click.UsageError("--list takes only --project; --reindex takes nothing else")
        if reindex:
            result = limit_verbs.reindex_blocks(context())
            output.emit(result, f"reindexed the blocks of {result['projects']} projects")
        else:
            show(limit_verbs.blocks, project)
        return
    if entry is None:
        raise click.UsageError("give an ENTRY (ip:ADDRESS, ip:CIDR or name:DOWNLOADER)")
    result = limit_verbs.block(context(), entry, project, remove)
    output.emit(result, ("unblocked " if remove else "blocked ") + result["entry"])
