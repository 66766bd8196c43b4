"""/admin/P/filter: the project's Bloom filter (kind, layers, fill, capacity, the false-positive
rate expected at its fill) and the form that sets its geometry while it is empty; both through
tracker_core.admin.backfeed_verbs.bloom_filter, as `tracker backfeed filter P` does."""

from __future__ import annotations

import math

from tracker_core.admin import backfeed_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.items import bloom_geometry


def _number(form, name: str, kind):
    text = form.text(name)
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise BadInput(f"{name!r} must be {'an integer' if kind is int else 'a number'}") from None


def described(shown: dict) -> dict:
    """The verb's answer with each layer's fill and expected rate, and the filter's: an absent
    name is a false positive when any layer says yes: 1 - the product of the layers' no, summed
    as logarithms (1 - 1e-97 is 1.0 in a float)."""
    kind, log_absent = shown["kind"], 0.0
    layers = []
    for layer in shown["layers"]:
        rate = bloom_geometry.rate_at(
            kind, layer["k"], layer["bytes"] * 8, layer["fingerprint_bytes"], layer["items"]
        )
        log_absent += math.log1p(-rate) if rate < 1 else -math.inf
        layers.append({**layer, "fill": layer["items"] / layer["capacity"], "rate_now": rate})
    capacity = sum(layer["capacity"] for layer in layers)
    return {
        **shown,
        "layers": layers,
        "capacity_total": capacity,
        "fill": shown["items"] / capacity if capacity else 0.0,
        "rate_now": -math.expm1(log_absent),
        "bytes_total": sum(layer["bytes"] for layer in layers),
    }


class FilterPages:
    """ProjectPages' filter view and its action."""

    admin: AdminContext

    def _filter(self, req, project):
        shown = backfeed_verbs.bloom_filter(self.admin, project)
        sharded = len(self.admin.layout(project).keys)
        return {"bloom": described(shown), "kinds": bloom_geometry.KINDS, "shard_count": sharded}

    def _do_filter(self, ctx, project, form):
        """Set the geometry (refused, 409, once the filter holds items)."""
        capacity = _number(form, "capacity", int)
        fp_rate = _number(form, "fp_rate", float)
        kind = form.text("kind") or None
        if capacity is None and fp_rate is None and kind is None:
            raise BadInput("give a kind, a capacity or a false-positive rate")
        done = backfeed_verbs.bloom_filter(ctx, project, capacity, fp_rate, kind)
        return f"filter set: {done['kind']}, capacity {done['capacity']:,}, rate {done['fp_rate']:g}"
