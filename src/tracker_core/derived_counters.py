"""Counters the scripts no longer store, because other counters add up to them.

``requests``: every claim that reaches a known project (claim-21.lua) counts exactly one outcome
field (REQUEST_OUTCOMES) in the stats hash and in its minute's hash. The script once also
counted every claim under ``requests``: two more HINCRBYs on every claim (about 11,000 of its
~180,000 Redis instructions, and two of its eleven AOF entries). A 455 for an outdated client
(warrior.py, ``requests_outdated``) is refused before any claim and is not one of them.

``rtt_count``: every item done with a claim time counts once in exactly one bucket of the RTT
histogram (``rtt_le_B``, done-20.lua), so the buckets add up to it; storing it was two more
HINCRBYs on every done.

The readers (engine.counts, census, the statistics' minute and hour hashes, rollup_day-25.lua
for a day's requests) set both with ``with_derived``, whatever a hash stored under those names
before: older hashes hold them too, and the stored values stopped growing.
"""

from __future__ import annotations

REQUEST_OUTCOMES = (
    "requests_served",
    "requests_empty",
    "requests_claims_limited",
    "requests_blocked",
    "requests_paused",
    "requests_capped",
    "requests_limited",
)
RTT_BUCKET_PREFIX = "rtt_le_"  # stats.RTT_FIELD_PREFIX: done-20.lua's histogram fields


def with_derived(counts: dict) -> dict:
    """COUNTS (field -> int) with "requests" set to the sum of its REQUEST_OUTCOMES and
    "rtt_count" to the sum of its RTT buckets, in place (returned too). A sum none of whose
    parts is present (a minute of dones only, a backlog sample) is not added."""
    requests, any_outcome = 0, False
    for field in REQUEST_OUTCOMES:
        value = counts.get(field)
        if value is not None:
            requests += value
            any_outcome = True
    if any_outcome:
        counts["requests"] = requests
    rtt = [value for field, value in counts.items() if field.startswith(RTT_BUCKET_PREFIX)]
    if rtt:
        counts["rtt_count"] = sum(rtt)
    return counts
