"""`tracker admin hq` and `tracker admin warriors`: the warrior HQ's document and registry."""

from __future__ import annotations

import click

from tracker_api.cli.root import admin_group, key_values, show
from tracker_core.admin import hq_verbs


@admin_group.command("warriors")
@click.option("--offset", default=0, type=click.IntRange(0, 10**9), help="Skip this many warriors.")
@click.option("--count", default=100, type=click.IntRange(1, 1000), help="Show at most this many.")
def admin_warriors(offset, count):
    """Registered warriors by last heartbeat, newest first, and how many are online (a
    heartbeat in the last 25 minutes), like GET /api/admin/warriors."""
    show(hq_verbs.warriors, offset, count)


@admin_group.command("hq")
@click.argument("assignments", nargs=-1, required=True)
def admin_hq(assignments):
    """Set projects.json's global fields: tracker admin hq KEY=VALUE... (auto_project,
    broadcast_message, seesaw_version)."""
    show(hq_verbs.set_fields, key_values(assignments))
