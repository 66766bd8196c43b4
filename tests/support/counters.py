"""Counter hashes as every reader sees them: stored fields plus the derived ones
(tracker_core.scripts.derived_counters), so a test asserts what the statistics show, not how a script
happened to store it."""

from tracker_core.scripts.derived_counters import with_derived


def totals(r, stats_key: str) -> dict[str, int]:
    """A project's stats hash with its derived totals (items_done of one-item dones, ...)."""
    return with_derived({f: int(v) for f, v in r.hgetall(stats_key).items()}, totals=True)


def minute_counts(r, key: str) -> dict[str, int]:
    """A minute's (or an hour's) counter hash with its derived counts."""
    return with_derived({f: int(v) for f, v in r.hgetall(key).items()})
