"""Offload settings at and just past each bound of settings.offload_rules: the one table that the
admin API, the CLI and the admin pages' form are each tested against.

Each case: (stored before the change, the change, a fragment of the one-line reason, or None
when the change is accepted). The stored part is written into the settings hash directly, so a
case can start from any state; the change goes through the face under test in one call.
"""

from __future__ import annotations

import pytest


def watermarks(high: int, low: int, segment_items: int) -> dict[str, str]:
    """offload_high, offload_low and offload_segment_items as stored (text)."""
    return {"offload_high": str(high), "offload_low": str(low), "offload_segment_items": str(segment_items)}


SOUND = watermarks(2000, 1000, 1000)
WIDE = watermarks(3000, 1000, 1000)


def _case(label, stored, change, refused):
    return pytest.param(stored, change, refused, id=label)


CASES = [
    # offload_high without offload_low: offloaded items would never come back.
    _case("high-without-low", {}, {"offload_high": "2000"}, "offload_high=2000 without offload_low"),
    _case("high-with-lowest-low", {}, watermarks(2000, 1, 1999), None),
    # offload_low at or above offload_high.
    _case("low-at-high", {}, watermarks(2000, 2000, 1), "offload_low=2000 is not below offload_high=2000"),
    _case("low-above-high", {}, watermarks(2000, 2001, 1), "offload_low=2001 is not below"),
    _case("low-just-below-high", {}, watermarks(2000, 1999, 1), None),
    # A segment must fit between the watermarks.
    _case(
        "segment-one-past-the-gap",
        {},
        watermarks(2000, 1000, 1001),
        "offload_segment_items=1001 is more than offload_high - offload_low = 1000",
    ),
    _case("segment-at-the-gap", {}, SOUND, None),
    # The default segment (50,000) counts too: the issue's own "bigger watermarks".
    _case(
        "default-segment-past-the-gap",
        {},
        {"offload_high": "20000", "offload_low": "5000"},
        "offload_segment_items=50000 is more than offload_high - offload_low = 15000",
    ),
    # Zero and negative values.
    _case("segment-zero", {}, {"offload_segment_items": "0"}, "offload_segment_items: must be 1 or more"),
    _case("segment-one", {}, {"offload_segment_items": "1"}, None),
    _case("high-one", {}, watermarks(1, 1, 1), "offload_high=1 leaves no room"),
    _case("high-two", {}, watermarks(2, 1, 1), None),
    _case("negative-high", {}, {"offload_high": "-1"}, "offload_high: must be 0 or more"),
    _case("negative-low", {}, {"offload_low": "-1"}, "offload_low: must be 0 or more"),
    # One setting at a time: each change is checked with what is stored, as a whole.
    _case(
        "high-lowered-past-the-stored-gap",
        WIDE,
        {"offload_high": "1999"},
        "offload_segment_items=1000 is more than offload_high - offload_low = 999",
    ),
    _case("high-lowered-to-the-stored-gap", WIDE, {"offload_high": "2000"}, None),
    _case(
        "low-raised-past-the-stored-gap",
        WIDE,
        {"offload_low": "2001"},
        "offload_segment_items=1000 is more than offload_high - offload_low = 999",
    ),
    _case("low-raised-to-the-stored-gap", WIDE, {"offload_low": "2000"}, None),
    _case("low-first-while-off", {}, {"offload_low": "1000"}, None),
    _case(
        "high-after-low-and-segment",
        {"offload_low": "1000", "offload_segment_items": "1000"},
        {"offload_high": "2000"},
        None,
    ),
    _case("offloading-turned-off", SOUND, {"offload_high": "0"}, None),
    # done_mode=offload writes its segments with offload_segment_items too.
    _case(
        "done-offload-segment-zero",
        {},
        {"done_mode": "offload", "offload_segment_items": "0"},
        "offload_segment_items: must be 1 or more",
    ),
    _case("done-offload-keeps-none", {}, {"done_mode": "offload", "done_offload_high": "0"}, None),
]
