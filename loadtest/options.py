"""Warrior behaviour as Locust command-line options (each with an environment variable too).

Pure Python apart from the parser Locust hands in, so the tests can check the parsing helpers.
The master sends these values to its workers with every spawn message, so a distributed run is
configured on the master's command line only.
"""

from __future__ import annotations

import random
import re

# seesaw-kit waits 60 s after a non-200, 10 s more after each further one, at most 300 s.
SEESAW_RETRY_DELAY_S = 60


def add_arguments(parser) -> None:
    """Register the warrior options on Locust's argument parser.

    Straight on the parser: only its add_argument knows Locust's web-UI keywords. Locust reads
    the locustfile after handling --help, so these options are not listed there.
    """
    parser.add_argument(
        "--project", env_var="LOADTEST_PROJECT", default="loadtest", help="Project slug the warriors work on."
    )
    parser.add_argument(
        "--tracker-redis-url",
        env_var="TRACKER_REDIS_URL",
        default="",
        include_in_web_ui=False,
        help="The tracker's Redis, for seeding and the final accounting "
        "(master or local run only). Empty: neither.",
    )
    parser.add_argument(
        "--seed-items",
        env_var="LOADTEST_SEED_ITEMS",
        type=int,
        default=0,
        help="Create the project if needed and queue this many new items at test start.",
    )
    parser.add_argument(
        "--multi",
        env_var="LOADTEST_MULTI",
        default="1",
        help="Items per request: K (1 = plain /request) or A-B (random per request).",
    )
    parser.add_argument(
        "--download-time",
        env_var="LOADTEST_DOWNLOAD_TIME",
        default="uniform:0.5,2",
        help="Simulated download time per claim in seconds: const:S, uniform:A,B, "
        "exp:MEAN or lognormal:MU,SIGMA.",
    )
    parser.add_argument(
        "--fail-share",
        env_var="LOADTEST_FAIL_SHARE",
        type=float,
        default=0.0,
        help="Share of items that fail (left out of done).",
    )
    parser.add_argument(
        "--abandon-share",
        env_var="LOADTEST_ABANDON_SHARE",
        type=float,
        default=0.0,
        help="Share of claims abandoned outright (no done; exercises reclaiming).",
    )
    parser.add_argument(
        "--backfeed-share",
        env_var="LOADTEST_BACKFEED_SHARE",
        type=float,
        default=0.0,
        help="Share of claims followed by a backfeed POST of discovered items (0 = off).",
    )
    parser.add_argument(
        "--backfeed-items",
        env_var="LOADTEST_BACKFEED_ITEMS",
        type=int,
        default=50,
        help="Items per backfeed POST.",
    )
    parser.add_argument(
        "--backfeed-repeat-share",
        env_var="LOADTEST_BACKFEED_REPEAT_SHARE",
        type=float,
        default=0.3,
        help="Share of backfed items that repeat ones this warrior sent before.",
    )
    parser.add_argument(
        "--backfeed-secret",
        env_var="LOADTEST_BACKFEED_SECRET",
        default="",
        is_secret=True,
        help="The project's backfeed secret (/backfeed/legacy/PROJECT-SECRET).",
    )
    parser.add_argument(
        "--client-version",
        env_var="LOADTEST_CLIENT_VERSION",
        default="20240102.01",
        help="Grab-script version sent with every call.",
    )
    parser.add_argument(
        "--keep-alive",
        env_var="LOADTEST_KEEP_ALIVE",
        action="store_true",
        default=False,
        help="Reuse connections (seesaw-kit closes every one).",
    )
    parser.add_argument(
        "--retry-delay-s",
        env_var="LOADTEST_RETRY_DELAY_S",
        type=float,
        default=SEESAW_RETRY_DELAY_S,
        help="Back-off after a non-200, growing like seesaw-kit's "
        "(60 s, +10 s, up to 300 s), scaled to this first delay.",
    )
    parser.add_argument(
        "--min-irsr",
        env_var="LOADTEST_MIN_IRSR",
        type=float,
        default=0.99,
        help="Fail the run if IRSR while items remained is below this.",
    )
    parser.add_argument(
        "--max-5xx",
        env_var="LOADTEST_MAX_5XX",
        type=int,
        default=0,
        help="Fail the run if more answers than this were 5xx.",
    )
    parser.add_argument(
        "--max-done-not-ok",
        env_var="LOADTEST_MAX_DONE_NOT_OK",
        type=int,
        default=0,
        help="Fail the run if more done calls than this got anything but 200 OK.",
    )
    parser.add_argument(
        "--max-backfeed-errors",
        env_var="LOADTEST_MAX_BACKFEED_ERRORS",
        type=int,
        default=0,
        help="Fail the run if more backfeed posts than this failed.",
    )
    parser.add_argument(
        "--figures-json",
        env_var="LOADTEST_FIGURES_JSON",
        default="",
        include_in_web_ui=False,
        help="Write the final warrior figures and checks to this JSON file.",
    )


_DISTRIBUTION_RE = re.compile(r"(const|uniform|exp|lognormal):([0-9.eE+-]+)(?:,([0-9.eE+-]+))?\Z")


def download_time_sampler(spec: str, rng: random.Random):
    """Return a function drawing simulated download times (seconds, >= 0) as SPEC says."""
    match = _DISTRIBUTION_RE.match(spec.strip())
    if not match:
        raise ValueError(
            f"bad download time {spec!r}: use const:S, uniform:A,B, exp:MEAN or lognormal:MU,SIGMA"
        )
    kind, first, second = match.group(1), float(match.group(2)), match.group(3)
    needs_two = kind in ("uniform", "lognormal")
    if needs_two != (second is not None):
        wanted = 2 if needs_two else 1
        raise ValueError(f"bad download time {spec!r}: {kind} takes {wanted} number(s)")
    second = float(second) if second is not None else 0.0
    if kind == "const":
        return lambda: max(0.0, first)
    if kind == "uniform":
        return lambda: max(0.0, rng.uniform(first, second))
    if kind == "exp":
        return lambda: rng.expovariate(1.0 / first) if first > 0 else 0.0
    return lambda: rng.lognormvariate(first, second)


def multi_sampler(spec: str, rng: random.Random):
    """Return a function drawing the items per request: SPEC is K or A-B."""
    low, sep, high = spec.strip().partition("-")
    try:
        low_k, high_k = int(low), int(high) if sep else int(low)
    except ValueError:
        raise ValueError(f"bad multi {spec!r}: use K or A-B") from None
    if not 1 <= low_k <= high_k:
        raise ValueError(f"bad multi {spec!r}: need 1 <= A <= B")
    return lambda: rng.randint(low_k, high_k)


def retry_delays(first_s: float):
    """Yield seesaw-kit's growing back-off, scaled so the first delay is FIRST_S."""
    scale = first_s / SEESAW_RETRY_DELAY_S
    delay = SEESAW_RETRY_DELAY_S
    while True:
        yield delay * scale
        delay = min(300, delay + 10)


def check_share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value}")
