"""The headline figures of a run, and the history that keeps earlier runs' beside them."""

from __future__ import annotations

# What a run is judged by, in the order the table shows it: (key, what, unit).
HEADLINES = (
    ("request_per_s", "`/request` (multi=1) rate, one worker", "req/s"),
    ("request_worker_cpu_us", "worker CPU per `/request`", "µs"),
    ("request_redis_cpu_us", "Redis CPU per `/request`", "µs"),
    ("request_script_us", "claim script's own time per `/request` (commandstats)", "µs"),
    ("hello_per_s", "hello-world Falcon on bjoern rate, one worker", "req/s"),
    ("hello_worker_cpu_us", "hello-world worker CPU per request (framework floor)", "µs"),
    ("claim_script_us", "claim script called directly, own time per call (commandstats)", "µs"),
    ("claim_direct_redis_cpu_us", "claim script called directly, Redis CPU per call", "µs"),
    ("done_per_s", "`/done` rate (one item each), one worker", "req/s"),
    ("done_worker_cpu_us", "worker CPU per `/done`", "µs"),
    ("done_redis_cpu_us", "Redis CPU per `/done`", "µs"),
    ("backfeed_new_items_per_s", "backfeed new items/s (400 a post, Bloom 1e-6)", "items/s"),
    ("backfeed_redis_cpu_us_per_new_item", "Redis CPU per new backfeed item", "µs"),
    ("backfeed_worker_cpu_us_per_new_item", "worker CPU per new backfeed item", "µs"),
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


def headlines(cases: dict) -> dict:
    """The HEADLINES figures of a run's CASES."""
    request, hello, done = cases["request"], cases["hello"], cases["done"]
    claim, backfeed = cases["claim_script"], cases["backfeed"]
    return {
        "request_per_s": request["requests_per_s"],
        "request_worker_cpu_us": request["worker_cpu_us"],
        "request_redis_cpu_us": request["redis_cpu_us"],
        "request_script_us": request["evalsha_us_per_call"],
        "hello_per_s": hello["requests_per_s"],
        "hello_worker_cpu_us": hello["worker_cpu_us"],
        "claim_script_us": claim["evalsha_us_per_call"],
        "claim_direct_redis_cpu_us": claim["redis_cpu_us"],
        "done_per_s": done["requests_per_s"],
        "done_worker_cpu_us": done["worker_cpu_us"],
        "done_redis_cpu_us": done["redis_cpu_us"],
        "backfeed_new_items_per_s": backfeed["new_items_per_s"],
        "backfeed_redis_cpu_us_per_new_item": backfeed["redis_cpu_us_per_new_item"],
        "backfeed_worker_cpu_us_per_new_item": backfeed["worker_cpu_us_per_new_item"],
    }


def carried_history(previous: dict | None) -> list[dict]:
    """The history for a new run: the previous file's history plus its own figures, or the
    issue's baseline when there is no previous file."""
    if previous is None:
        return [BASELINE]
    entry = {
        "label": f"run of {previous.get('date_utc')}" + (" (quick)" if previous.get("quick") else ""),
        "date_utc": previous.get("date_utc"),
        "git_commit": previous.get("versions", {}).get("git_commit"),
        "command": previous.get("command"),
        "figures": previous["figures"],
    }
    return [*previous.get("history", [BASELINE]), entry]
