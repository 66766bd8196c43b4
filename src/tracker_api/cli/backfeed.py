"""`tracker backfeed ...`: secrets, the shard map and the Bloom filter."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import context, main, show, slug_command
from tracker_core.admin import backfeed_verbs, checks
from tracker_core.items import bloom, bloom_geometry


@main.group()
def backfeed():
    """Backfeed: per-project secrets and the Bloom filter that dedups every item."""


@backfeed.group("secret")
def backfeed_secret():
    """Create, list and revoke the secrets grab scripts post backfeed with."""


slug_command(
    backfeed_secret,
    "create",
    backfeed_verbs.create_secret,
    "Create a secret for SLUG; it is printed once (only its hash is stored).",
)


slug_command(
    backfeed_secret,
    "list",
    backfeed_verbs.list_secrets,
    "List the ids and creation times of SLUG's secrets (never the secrets).",
)


@backfeed_secret.command("revoke")
@click.argument("slug")
@click.argument("secret_id")
def backfeed_secret_revoke(slug, secret_id):
    """Revoke SLUG's secret with id SECRET_ID (the 12 characters `list` shows, or a prefix of 6
    or more that only one secret has)."""
    result = backfeed_verbs.revoke_secret(context(), slug, secret_id)
    output.emit(result, f"revoked {result['revoked']}")


@backfeed.command("shard-map")
@click.argument("slug")
@click.argument("shard", required=False)
@click.argument("queue", required=False)
@click.option("--remove", is_flag=True, help="Send SHARD's items to todo:backfeed again.")
def backfeed_shard_map(slug, shard, queue, remove):
    """Map backfeed SHARD of SLUG to QUEUE; with no SHARD, show the map and per-shard counts."""
    ctx = context()
    if shard is None:
        shown, counts, cursor = None, {}, 0
        while True:  # the counts a page at a time, printed at once
            page = backfeed_verbs.shard_map(ctx, slug, cursor, checks.MAX_PAGE)
            shown, cursor = page["map"], page["cursor"]
            counts.update(page["items"])
            if cursor == 0:
                break
        output.emit({"map": shown, "items": counts})
        return
    if remove == (queue is not None):
        raise click.UsageError("give QUEUE, or --remove")
    if remove:
        result = backfeed_verbs.unmap_shard(ctx, slug, shard)
    else:
        result = backfeed_verbs.map_shard(ctx, slug, shard, queue)
    output.emit(result, f"{result['shard']} -> {result['queue']}")


@backfeed.command("filter")
@click.argument("slug")
@click.option(
    "--capacity",
    type=click.IntRange(1, bloom_geometry.MAX_CAPACITY),
    default=None,
    help="Items the first layer holds at the target rate (set while empty; at most a billion, and "
    "a first layer of at most 4 GiB). A sharded project's is shared out over its shards.",
)
@click.option(
    "--fp-rate",
    type=click.FloatRange(1e-15, 0.5),
    default=None,
    help="False-positive rate for absent items (set while empty).",
)
@click.option(
    "--kind",
    type=click.Choice(bloom.KINDS),
    default=None,
    help=f"How items are kept (set while empty; new filters: {bloom.DEFAULT_KIND}): fingerprint "
    "(3-byte fingerprints in buckets, fewest Redis operations per item), layered (k = 20 bits per "
    "item, the smallest) or wide (35 bits per item, k = 10). See docs/data-model.md.",
)
def backfeed_filter(slug, capacity, fp_rate, kind):
    """Show SLUG's Bloom filter (kind, layers, items, memory); set its geometry while it is empty."""
    show(backfeed_verbs.bloom_filter, slug, capacity, fp_rate, kind)
