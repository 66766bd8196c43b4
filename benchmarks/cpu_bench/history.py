"""The headline figures of a run, and the history that keeps earlier runs' beside them."""

from __future__ import annotations

# What a run is judged by, in the order the table shows it: key, unit, what.
_HEADLINE_ROWS = """
request_busy_per_s                               req/s     `/request` (multi=1) rate at full load (default workers)
request_busy_worker_cpu_us                       µs        worker CPU per `/request` at full load
request_busy_redis_cpu_us                        µs        Redis CPU per `/request` at full load
request_busy_script_us                           µs        claim script's own time per `/request` at full load (commandstats)
request_unix_busy_per_s                          req/s     `/request` rate at full load, Redis on a Unix socket
request_unix_busy_worker_cpu_us                  µs        worker CPU per `/request` at full load, Unix socket
request_unix_busy_redis_cpu_us                   µs        Redis CPU per `/request` at full load, Unix socket
done_busy_per_s                                  req/s     `/done` rate (one item each) at full load
done_busy_worker_cpu_us                          µs        worker CPU per `/done` at full load
done_busy_redis_cpu_us                           µs        Redis CPU per `/done` at full load
done_busy_script_us                              µs        done script's own time per `/done` at full load (commandstats)
hello_busy_per_s                                 req/s     hello-world rate at full load (same workers)
hello_busy_worker_cpu_us                         µs        hello-world worker CPU per request at full load
hello_ping_busy_worker_cpu_us                    µs        hello-world with one Redis PING a request at full load: worker CPU (one round trip's floor)
hello_ping_busy_redis_cpu_us                     µs        the same: Redis CPU per request
request_per_s                                    req/s     `/request` (multi=1) rate, one worker
request_worker_cpu_us                            µs        worker CPU per `/request`
request_redis_cpu_us                             µs        Redis CPU per `/request`
request_script_us                                µs        claim script's own time per `/request` (commandstats)
request_redis_commands                           commands  Redis commands per `/request` (the script's included)
request_unix_per_s                               req/s     `/request` rate, Redis on a Unix socket (`tracker run`'s default)
request_unix_worker_cpu_us                       µs        worker CPU per `/request`, Redis on a Unix socket
request_unix_redis_cpu_us                        µs        Redis CPU per `/request`, Redis on a Unix socket
hello_per_s                                      req/s     hello-world Falcon on bjoern rate, one worker
hello_worker_cpu_us                              µs        hello-world worker CPU per request (framework floor)
claim_script_us                                  µs        claim script called directly, own time per call (commandstats)
claim_direct_redis_cpu_us                        µs        claim script called directly, Redis CPU per call
done_per_s                                       req/s     `/done` rate (one item each), one worker
done_worker_cpu_us                               µs        worker CPU per `/done`
done_redis_cpu_us                                µs        Redis CPU per `/done`
done_script_us                                   µs        done script's own time per `/done` (commandstats)
done_redis_commands                              commands  Redis commands per `/done` (the script's included)
backfeed_new_items_per_s                         items/s   backfeed new items/s (400 a post, layered Bloom filter at 1e-6)
backfeed_redis_cpu_us_per_new_item               µs        Redis CPU per new backfeed item (layered filter)
backfeed_worker_cpu_us_per_new_item              µs        worker CPU per new backfeed item (layered filter)
backfeed_fingerprint_new_items_per_s             items/s   backfeed new items/s, fingerprint filter at 1e-6
backfeed_fingerprint_redis_cpu_us_per_new_item   µs        Redis CPU per new backfeed item (fingerprint filter)
backfeed_fingerprint_worker_cpu_us_per_new_item  µs        worker CPU per new backfeed item (fingerprint filter)
"""
HEADLINES = tuple(
    (key, what, unit)
    for key, unit, what in (row.split(maxsplit=2) for row in _HEADLINE_ROWS.strip().splitlines())
)


# The figures issue 16 was filed with ("50-63 us" is kept as its range).
BASELINE = {
    "label": "issue 16 baseline (as filed)",
    "date_utc": None,
    "figures": {
        "request_worker_cpu_us": [50, 63],
        "request_redis_cpu_us": [45, 60],
        "hello_worker_cpu_us": 15,
        "claim_script_us": 27,
        "backfeed_redis_cpu_us_per_new_item": 15,
    },
}


# Each wrk case's figures: (name in the headline key, key in the case's results).
_CASE_FIGURES = (
    ("per_s", "requests_per_s"),
    ("worker_cpu_us", "worker_cpu_us"),
    ("redis_cpu_us", "redis_cpu_us"),
    ("script_us", "evalsha_us_per_call"),
    ("redis_commands", "redis_commands_per_unit"),
)
_BACKFEED_FIGURES = ("new_items_per_s", "redis_cpu_us_per_new_item", "worker_cpu_us_per_new_item")


def headlines(cases: dict) -> dict:
    """The HEADLINES figures of a run's CASES."""
    claim = cases["claim_script"]
    figures = {
        "claim_script_us": claim["evalsha_us_per_call"],
        "claim_direct_redis_cpu_us": claim["redis_cpu_us"],
        # Runs from before the full-load rows have none (their columns stay empty).
        **{
            f"{case}_{figure}": cases[case][key]
            for case in cases
            for figure, key in _CASE_FIGURES
            if cases[case].get(key) is not None
        },
        **{
            f"{case}_{figure}": cases[case][figure]
            for case in ("backfeed", "backfeed_fingerprint")
            for figure in _BACKFEED_FIGURES
        },
    }
    return {key: figures[key] for key, _, _ in HEADLINES if key in figures}  # in the table's order


# The aims issue 16 set, shown beside the figures (µs; None: no aim for that figure).
AIMS = {
    "request_busy_worker_cpu_us": "≤ 30",
    "request_busy_redis_cpu_us": "≤ 25",
    "request_unix_busy_worker_cpu_us": "≤ 30",
    "request_unix_busy_redis_cpu_us": "≤ 25",
    "done_busy_worker_cpu_us": "≤ 30",
    "done_busy_redis_cpu_us": "≤ 25",
    "request_worker_cpu_us": "≤ 30",
    "request_redis_cpu_us": "≤ 25",
    "request_unix_worker_cpu_us": "≤ 30",
    "request_unix_redis_cpu_us": "≤ 25",
    "done_worker_cpu_us": "≤ 30",
    "done_redis_cpu_us": "≤ 25",
    "backfeed_redis_cpu_us_per_new_item": "≤ 5",
    "backfeed_fingerprint_redis_cpu_us_per_new_item": "≤ 5",
}

# Columns of cpu.md's table besides this run: the filed baseline, the first run recorded (where
# the work on issue 16 started) and the latest few; cpu.json keeps every run.
SHOWN_LATEST = 3


def shown_history(history: list[dict]) -> list[dict]:
    """The earlier runs cpu.md shows, oldest first."""
    if len(history) <= SHOWN_LATEST + 2:
        return history
    return [*history[:2], *history[-SHOWN_LATEST:]]


def carried_history(previous: dict | None) -> list[dict]:
    """The history for a new run: the previous file's history plus its own figures, or the
    issue's baseline when there is no previous file."""
    if previous is None:
        return [BASELINE]
    entry = {
        "label": f"run of {previous.get('date') or previous.get('date_utc')}"
        + (" (quick)" if previous.get("quick") else ""),
        "date_utc": previous.get("date") or previous.get("date_utc"),
        "git_commit": previous.get("versions", {}).get("git_commit"),
        "command": previous.get("command"),
        "figures": previous["figures"],
    }
    return [*previous.get("history", [BASELINE]), entry]
