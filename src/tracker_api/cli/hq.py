"""`tracker admin hq` and `tracker admin warriors`: the warrior HQ's document and registry."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import admin, admin_group, audit, key_values


@admin_group.command("warriors")
@click.option(
    "--offset", default=0, show_default=True, type=click.IntRange(0, 10**9), help="Skip this many warriors."
)
@click.option(
    "--count", default=100, show_default=True, type=click.IntRange(1, 1000), help="Show at most this many."
)
@output.json_option
def admin_warriors(offset, count):
    """Registered warriors by last heartbeat, newest first, and how many are online (a
    heartbeat in the last 25 minutes), like GET /api/admin/warriors."""
    from tracker_core import hq

    output.emit(hq.registry(admin().r, offset, count))


@admin_group.command("hq")
@click.argument("assignments", nargs=-1, required=True)
@output.json_option
def admin_hq(assignments):
    """Set projects.json's global fields: tracker admin hq KEY=VALUE... (auto_project,
    broadcast_message, seesaw_version)."""
    from tracker_core import operations

    values = key_values(assignments)
    a = admin()
    result = operations.set_hq(a, values)
    audit(a, "hq.set", fields=result["hq"])
    output.emit(result)
