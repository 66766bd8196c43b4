"""A project's item requests, read as the sum of their outcomes.

Every claim that reaches a known project (claim-22.lua) counts exactly one outcome field in the
stats hash and in its minute's hash. The script once also counted every claim under
``requests``: two more HINCRBYs on every claim (about 11,000 of its ~180,000 Redis
instructions, and two of its eleven AOF entries) for a figure these fields already hold. The
readers (engine.counts, census, the statistics' minute and hour hashes, rollup_day-25.lua) now
set ``requests`` to the sum, whatever a hash stored under that name before (older hashes hold
both, and the stored value stopped growing). A 455 for an outdated client (warrior.py,
``requests_outdated``) is refused before any claim and is not one of them, as before.
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


def with_requests(counts: dict) -> dict:
    """COUNTS (field -> int) with "requests" set to the sum of its REQUEST_OUTCOMES, in place
    (returned too). Counts that hold no outcome at all (a minute of dones only, a backlog
    sample) are left as they are: no "requests" is added."""
    total, seen = 0, False
    for field in REQUEST_OUTCOMES:
        value = counts.get(field)
        if value is not None:
            total += value
            seen = True
    if seen:
        counts["requests"] = total
    return counts
