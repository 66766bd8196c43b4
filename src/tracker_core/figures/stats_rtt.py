"""Round trip times (claim to done): the done script's histogram as percentiles and a summary."""

from __future__ import annotations

import math

from tracker_core.scripts.constants import RTT_BOUNDS_S  # the scripts' own
from tracker_core.scripts.derived_counters import RTT_BUCKET_PREFIX

PERCENTILES = (50, 90, 99)
RTT_FIELD_PREFIX = RTT_BUCKET_PREFIX  # done-20.lua's histogram fields


def rtt_histogram(counters: dict[str, int]) -> list[tuple[float, int]]:
    """(upper bound in seconds, count) for every bucket of the rtt_le_* fields, by bound."""
    buckets = {float(b): 0 for b in RTT_BOUNDS_S}
    buckets[math.inf] = 0
    for field, count in counters.items():
        if field.startswith(RTT_FIELD_PREFIX):
            bound = field[len(RTT_FIELD_PREFIX) :]
            buckets[math.inf if bound == "inf" else float(bound)] = count
    return sorted(buckets.items())


def percentile(histogram: list[tuple[float, int]], q: float) -> float | None:
    """Estimate the Q-th percentile (0-100) in seconds, linear within a bucket.

    The open top bucket has no upper edge, so a percentile that lands there is reported as its
    lower edge: a floor, never an invented number.
    """
    total = sum(count for _, count in histogram)
    if not total:
        return None
    rank = q / 100 * total
    seen, lower = 0, 0.0
    for bound, count in histogram:
        if count and seen + count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * max(0.0, rank - seen) / count
        seen += count
        lower = bound if not math.isinf(bound) else lower
    return lower


def rtt_summary(counters: dict[str, int]) -> dict:
    histogram = rtt_histogram(counters)
    n = counters.get("rtt_count", 0)
    return {
        "mean_s": (counters.get("rtt_sum_ms", 0) / n / 1000) if n else None,
        "count": n,
        **{f"p{q}_s": percentile(histogram, q) for q in PERCENTILES},
        "histogram": [["inf" if math.isinf(b) else b, c] for b, c in histogram if c],
    }
