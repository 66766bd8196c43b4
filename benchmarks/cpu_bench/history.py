"""The headline figures of a run, and the history that keeps earlier runs' beside them."""

from __future__ import annotations

# What a run is judged by, in the order the table shows it: (key, what, unit).
HEADLINES = (
    ("request_busy_per_s", "`/request` (multi=1) rate at full load (default workers)", "req/s"),
    ("request_busy_worker_cpu_us", "worker CPU per `/request` at full load", "µs"),
    ("request_busy_redis_cpu_us", "Redis CPU per `/request` at full load", "µs"),
    ("request_busy_script_us", "claim script's own time per `/request` at full load (commandstats)", "µs"),
    ("request_unix_busy_per_s", "`/request` rate at full load, Redis on a Unix socket", "req/s"),
    ("request_unix_busy_worker_cpu_us", "worker CPU per `/request` at full load, Unix socket", "µs"),
    ("request_unix_busy_redis_cpu_us", "Redis CPU per `/request` at full load, Unix socket", "µs"),
    ("done_busy_per_s", "`/done` rate (one item each) at full load", "req/s"),
    ("done_busy_worker_cpu_us", "worker CPU per `/done` at full load", "µs"),
    ("done_busy_redis_cpu_us", "Redis CPU per `/done` at full load", "µs"),
    ("done_busy_script_us", "done script's own time per `/done` at full load (commandstats)", "µs"),
    ("hello_busy_per_s", "hello-world rate at full load (same workers)", "req/s"),
    ("hello_busy_worker_cpu_us", "hello-world worker CPU per request at full load", "µs"),
    (
        "hello_ping_busy_worker_cpu_us",
        "hello-world with one Redis PING a request at full load: worker CPU (one round trip's floor)",
        "µs",
    ),
    ("hello_ping_busy_redis_cpu_us", "the same: Redis CPU per request", "µs"),
    ("request_per_s", "`/request` (multi=1) rate, one worker", "req/s"),
    ("request_worker_cpu_us", "worker CPU per `/request`", "µs"),
    ("request_redis_cpu_us", "Redis CPU per `/request`", "µs"),
    ("request_script_us", "claim script's own time per `/request` (commandstats)", "µs"),
    ("request_redis_commands", "Redis commands per `/request` (the script's included)", "commands"),
    ("request_unix_per_s", "`/request` rate, Redis on a Unix socket (`tracker run`'s default)", "req/s"),
    ("request_unix_worker_cpu_us", "worker CPU per `/request`, Redis on a Unix socket", "µs"),
    ("request_unix_redis_cpu_us", "Redis CPU per `/request`, Redis on a Unix socket", "µs"),
    ("hello_per_s", "hello-world Falcon on bjoern rate, one worker", "req/s"),
    ("hello_worker_cpu_us", "hello-world worker CPU per request (framework floor)", "µs"),
    ("claim_script_us", "claim script called directly, own time per call (commandstats)", "µs"),
    ("claim_direct_redis_cpu_us", "claim script called directly, Redis CPU per call", "µs"),
    ("done_per_s", "`/done` rate (one item each), one worker", "req/s"),
    ("done_worker_cpu_us", "worker CPU per `/done`", "µs"),
    ("done_redis_cpu_us", "Redis CPU per `/done`", "µs"),
    ("done_script_us", "done script's own time per `/done` (commandstats)", "µs"),
    ("done_redis_commands", "Redis commands per `/done` (the script's included)", "commands"),
    (
        "backfeed_new_items_per_s",
        "backfeed new items/s (400 a post, layered Bloom filter at 1e-6)",
        "items/s",
    ),
    ("backfeed_redis_cpu_us_per_new_item", "Redis CPU per new backfeed item (layered filter)", "µs"),
    ("backfeed_worker_cpu_us_per_new_item", "worker CPU per new backfeed item (layered filter)", "µs"),
    ("backfeed_fingerprint_new_items_per_s", "backfeed new items/s, fingerprint filter at 1e-6", "items/s"),
    (
        "backfeed_fingerprint_redis_cpu_us_per_new_item",
        "Redis CPU per new backfeed item (fingerprint filter)",
        "µs",
    ),
    (
        "backfeed_fingerprint_worker_cpu_us_per_new_item",
        "worker CPU per new backfeed item (fingerprint filter)",
        "µs",
    ),
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
    figures = {
        "request_per_s": request["requests_per_s"],
        "request_worker_cpu_us": request["worker_cpu_us"],
        "request_redis_cpu_us": request["redis_cpu_us"],
        "request_script_us": request["evalsha_us_per_call"],
        "request_redis_commands": request["redis_commands_per_unit"],
        "request_unix_per_s": cases["request_unix"]["requests_per_s"],
        "request_unix_worker_cpu_us": cases["request_unix"]["worker_cpu_us"],
        "request_unix_redis_cpu_us": cases["request_unix"]["redis_cpu_us"],
        "hello_per_s": hello["requests_per_s"],
        "hello_worker_cpu_us": hello["worker_cpu_us"],
        "claim_script_us": claim["evalsha_us_per_call"],
        "claim_direct_redis_cpu_us": claim["redis_cpu_us"],
        "done_per_s": done["requests_per_s"],
        "done_worker_cpu_us": done["worker_cpu_us"],
        "done_redis_cpu_us": done["redis_cpu_us"],
        "done_script_us": done["evalsha_us_per_call"],
        "done_redis_commands": done["redis_commands_per_unit"],
        "backfeed_new_items_per_s": backfeed["new_items_per_s"],
        "backfeed_redis_cpu_us_per_new_item": backfeed["redis_cpu_us_per_new_item"],
        "backfeed_worker_cpu_us_per_new_item": backfeed["worker_cpu_us_per_new_item"],
        # Runs from before the full-load rows have none (their columns stay empty).
        **{
            f"{case}_busy_{figure}": cases[f"{case}_busy"][key]
            for case in ("request", "request_unix", "done", "hello", "hello_ping")
            if f"{case}_busy" in cases
            for figure, key in (
                ("per_s", "requests_per_s"),
                ("worker_cpu_us", "worker_cpu_us"),
                ("redis_cpu_us", "redis_cpu_us"),
                ("script_us", "evalsha_us_per_call"),
            )
            if cases[f"{case}_busy"].get(key) is not None
        },
        **{
            f"backfeed_fingerprint_{figure}": cases["backfeed_fingerprint"][figure]
            for figure in ("new_items_per_s", "redis_cpu_us_per_new_item", "worker_cpu_us_per_new_item")
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
