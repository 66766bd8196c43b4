"""`tracker backfeed ...`: secrets, the shard map and the Bloom filter."""

from __future__ import annotations

import click

from tracker_api.cli import errors, output
from tracker_api.cli.root import admin, audit, main
from tracker_core.admin import AdminError


@main.group()
def backfeed():
    """Backfeed: per-project secrets and the Bloom filter that dedups every item."""


@backfeed.group("secret")
def backfeed_secret():
    """Create, list and revoke the secrets grab scripts post backfeed with."""


@backfeed_secret.command("create")
@click.argument("slug")
@output.json_option
def backfeed_secret_create(slug):
    """Create a secret for SLUG; it is printed once (only its hash is stored)."""
    from tracker_core import operations

    a = admin()
    result = operations.create_backfeed_secret(a, slug)
    audit(a, "backfeed_secret.create", slug, id=result["id"])  # never the secret
    output.emit(result)


@backfeed_secret.command("list")
@click.argument("slug")
@output.json_option
def backfeed_secret_list(slug):
    """List the ids and creation times of SLUG's secrets (never the secrets)."""
    from tracker_core import operations

    output.emit(operations.list_backfeed_secrets(admin(), slug))


@backfeed_secret.command("revoke")
@click.argument("slug")
@click.argument("secret_id")
@output.json_option
def backfeed_secret_revoke(slug, secret_id):
    """Revoke SLUG's secret with id SECRET_ID (the 12 characters `list` shows, or a prefix of 6
    or more that only one secret has)."""
    from tracker_core import operations

    a = admin()
    revoked = operations.revoke_backfeed_secret(a, slug, secret_id)["revoked"]
    audit(a, "backfeed_secret.revoke", slug, id=revoked)
    output.emit({"revoked": revoked}, f"revoked {revoked}")


@backfeed.command("shard-map")
@click.argument("slug")
@click.argument("shard", required=False)
@click.argument("queue", required=False)
@click.option("--remove", is_flag=True, help="Send SHARD's items to todo:backfeed again.")
@output.json_option
def backfeed_shard_map(slug, shard, queue, remove):
    """Map backfeed SHARD of SLUG to QUEUE; with no SHARD, show the map and per-shard counts."""
    from tracker_core import operations

    a = admin()
    if shard is None:
        shown, counts, cursor = None, {}, 0
        while True:  # the counts a page at a time, printed at once
            page = operations.shard_map(a, slug, cursor, operations.MAX_PAGE)
            shown, cursor = page["map"], page["cursor"]
            counts.update(page["items"])
            if cursor == 0:
                break
        output.emit({"map": shown, "items": counts})
        return
    if remove:
        result = operations.unmap_shard(a, slug, shard)
        audit(a, "backfeed_shard.unmap", slug, shard=shard)
    elif queue is None:
        raise AdminError("give QUEUE, or --remove")
    else:
        result = operations.map_shard(a, slug, shard, queue)
        audit(a, "backfeed_shard.map", slug, **result)
    output.emit(result, f"{result['shard']} -> {result['queue']}")


@backfeed.command("filter")
@click.argument("slug")
@click.option(
    "--capacity",
    type=click.IntRange(1),
    default=None,
    help="Items the first layer holds at the target rate (set while empty).",
)
@click.option(
    "--fp-rate",
    type=click.FloatRange(1e-15, 0.5),
    default=None,
    help="False-positive rate for absent items (set while empty).",
)
@output.json_option
def backfeed_filter(slug, capacity, fp_rate):
    """Show SLUG's Bloom filter (layers, items, memory); set its geometry while it is empty."""
    from tracker_core import bloom

    a = admin()
    keys = a._keys(slug)
    wanted = None
    if capacity is not None or fp_rate is not None:
        wanted = bloom.Geometry(
            capacity=capacity or bloom.DEFAULT_CAPACITY, fp_rate=fp_rate or bloom.DEFAULT_FP_RATE
        )
    geometry = bloom.configure(a.r, keys, wanted, replace=wanted is not None)
    if geometry == -2:
        raise errors.Failure(f"{slug}'s filter already holds items; its geometry can't change")
    counts = a.r.hgetall(keys.bloom)
    output.emit(
        {
            "capacity": geometry.capacity,
            "fp_rate": geometry.fp_rate,
            "layers": [
                {
                    "capacity": layer.capacity,
                    "fp_rate": layer.fp_rate,
                    "k": layer.k,
                    "chunks": layer.chunks,
                    "bytes": layer.bits // 8,
                    "items": int(counts.get(f"n:{layer.index}", 0)),
                }
                for layer in geometry.all_layers()
            ],
            "items": int(counts.get("items", 0)),
            "bits_per_item_at_capacity": geometry.layer(0).bits / geometry.capacity,
        }
    )
