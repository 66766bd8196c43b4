"""Counters the scripts no longer store, because other counters add up to them.

``requests``: every claim that reaches a known project (claim-21.lua) counts exactly one outcome
field (REQUEST_OUTCOMES) in the stats hash and in its minute's hash. The script once also
counted every claim under ``requests``: two more HINCRBYs on every claim (about 11,000 of its
~180,000 Redis instructions, and two of its eleven AOF entries). A 455 for an outdated client
(warrior.py, ``requests_outdated``) is refused before any claim and is not one of them.

``requests_served_one``: a claim that served exactly one fresh item and no reclaim (most of them)
counts this outcome instead of ``requests_served`` and ``items_claimed``, one HINCRBY of the three
(about 7,000 of the claim's ~146,000 instructions, and one AOF entry). The readers add it to
``requests_served`` and, in the project's totals, to ``items_claimed``, then drop it: older
hashes and older tracker nodes count those two as before, and the sums stay exact.

``rtt_count``: every item done with a claim time counts once in exactly one bucket of the RTT
histogram (``rtt_le_B``, done-20.lua), so the buckets add up to it; storing it was two more
HINCRBYs on every done.

``done_one_le_B``: a done call with one new item that has an RTT in bucket B (most of them)
counts this field instead of ``items_done``, ``rtt_le_B`` and, in the stats hash,
``done_requests``: one HINCRBY where there were three in the stats hash, one where there were
two in the minute's (about 20,000 of the done's ~290,000 instructions, and three AOF entries).
The readers add it to ``items_done`` and ``rtt_le_B`` and, in the project's totals, to
``done_requests``, then drop it; like ``requests_served_one``, older hashes and nodes mix in
exactly.

The readers (engine.counts, census, the statistics' minute and hour hashes, rollup_day-25.lua
for a day's requests) set both with ``with_derived``, whatever a hash stored under those names
before: older hashes hold them too, and the stored values stopped growing.
"""

from __future__ import annotations

from tracker_core.scripts.constants import STATS_PAD_FIELD

SERVED_ONE = "requests_served_one"
REQUEST_OUTCOMES = (  # the outcome fields a claim stores (exactly one per claim)
    "requests_served",
    SERVED_ONE,
    "requests_empty",
    "requests_claims_limited",
    "requests_blocked",
    "requests_paused",
    "requests_capped",
    "requests_limited",
)
RTT_BUCKET_PREFIX = "rtt_le_"  # stats.RTT_FIELD_PREFIX: done-20.lua's histogram fields
DONE_ONE_PREFIX = "done_one_le_"  # done-20.lua's field for a call of one item done in a bucket


def with_derived(counts: dict, totals: bool = False) -> dict:
    """COUNTS (field -> int) with "requests" set to the sum of its REQUEST_OUTCOMES,
    requests_served_one added to "requests_served" (and with TOTALS, the project's stats hash, to
    "items_claimed") and removed, each done_one_le_B added to "rtt_le_B" and "items_done" (and
    with TOTALS to "done_requests") and removed, "rtt_count" set to the sum of its RTT buckets,
    and script_constants.STATS_PAD_FIELD (not a counter) removed, in place
    (returned too). A sum none of whose parts is present (a minute of dones only, a backlog
    sample) is not added."""
    counts.pop(STATS_PAD_FIELD, None)  # no counter: it keeps the stats hash a hashtable
    requests, any_outcome = 0, False
    for field in REQUEST_OUTCOMES:
        value = counts.get(field)
        if value is not None:
            requests += value
            any_outcome = True
    if any_outcome:
        counts["requests"] = requests
    one = counts.pop(SERVED_ONE, None)
    if one is not None:
        counts["requests_served"] = counts.get("requests_served", 0) + one
        if totals:
            counts["items_claimed"] = counts.get("items_claimed", 0) + one
    for field in [f for f in counts if f.startswith(DONE_ONE_PREFIX)]:
        one = counts.pop(field)
        bucket = RTT_BUCKET_PREFIX + field[len(DONE_ONE_PREFIX) :]
        counts[bucket] = counts.get(bucket, 0) + one
        counts["items_done"] = counts.get("items_done", 0) + one
        if totals:
            counts["done_requests"] = counts.get("done_requests", 0) + one
    rtt = [value for field, value in counts.items() if field.startswith(RTT_BUCKET_PREFIX)]
    if rtt:
        counts["rtt_count"] = sum(rtt)
    return counts
