"""What the API workers are given: the options run and serve share, the AppConfig and Limits
built from them, and the port checks that fail in one line."""

from __future__ import annotations

import contextlib
import errno
import socket
from pathlib import Path

import click

from tracker_api.cli import errors
from tracker_api.cli.root import segments_dir_option


def ensure_port_free(host: str, port: int, option: str) -> None:
    """Fail with one line now, before anything starts, when HOST:PORT cannot be listened on."""
    if not port:
        return  # any free port
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            probe.bind(address)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise errors.PortInUse(host, port, option) from None
        raise errors.Failure(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def listens_everywhere(host: str) -> bool:
    """Whether binding HOST listens on every address (0.0.0.0, ::, or an empty host)."""
    return host in ("", "0.0.0.0", "::")


def reachable_host(host: str) -> str:
    """HOST as it goes in a URL a browser on this machine can open: a wildcard address is no
    place to connect to, so its loopback stands in; an IPv6 address gets its brackets."""
    if listens_everywhere(host):
        return "[::1]" if host == "::" else "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@contextlib.contextmanager
def bind_failures(host: str, port: int, option: str):
    """Turn "address in use" while binding into the one-line PortInUse."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise errors.PortInUse(host, port, option) from None
        raise


def log_level_option(f):
    """--log-level (TRACKER_LOG_LEVEL), as every process command takes it."""
    from tracker_api.web import logs

    return click.option(
        "--log-level",
        envvar="TRACKER_LOG_LEVEL",
        default=logs.DEFAULT_LEVEL,
        type=click.Choice(logs.LEVELS, case_sensitive=False),
        help="Lowest level logged to stderr (lines: time, level, component, message).",
    )(f)


def _registry_bound(flag: str, default: int, help: str):
    """A bound of the warrior registry: a count of 1 or more, TRACKER_<FLAG> in the environment."""
    envvar = "TRACKER_" + flag.lstrip("-").replace("-", "_").upper()
    return click.option(flag, envvar=envvar, default=default, type=click.IntRange(1), help=help)


def _timeout(flag: str, default_s: float, help: str):
    """A time bound of the workers, 1 s to an hour, passed on as FLAG's name with _s."""
    return click.option(
        flag,
        flag.lstrip("-").replace("-", "_") + "_s",
        default=default_s,
        type=click.FloatRange(1, 3600),
        help=help,
    )


def _public_url(ctx, param, value: str) -> str:
    """--public-url checked at start: one line and exit 2 unless it is a plain http(s) URL."""
    from tracker_api.web import public_url

    try:
        return public_url.validate(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def serve_options(f):
    """The options of the API workers, shared by run and serve."""
    from tracker_api.server import DEFAULT_MAX_BODY_BYTES, WORKERS_PER_CORE, default_workers
    from tracker_api.web.config import DEFAULT_MEMORY_GUARD_PERCENT
    from tracker_core.warriors import hq

    options = [
        click.option("--host", default="127.0.0.1", help="Address to bind."),
        click.option("--port", default=8080, type=click.IntRange(0, 65535), help="Port of the API."),
        click.option(
            "--workers",
            default=default_workers(),
            type=click.IntRange(1, 256),
            help=f"bjoern processes sharing the port. Default {WORKERS_PER_CORE} per core: a worker "
            "serves one request at a time and waits for Redis on each, so a second one per core "
            "runs meanwhile (benchmarks/results/capacity.md).",
        ),
        click.option(
            "--trust-forwarded",
            is_flag=True,
            help="Take the client IP from X-Forwarded-For (behind a load balancer): "
            "the entry the trusted proxies appended, never one a client sent. A request whose "
            "header is missing or holds no address there is refused (400), never served as the proxy.",
        ),
        click.option(
            "--trusted-proxies",
            envvar="TRACKER_TRUSTED_PROXIES",
            default=1,
            type=click.IntRange(1, 16),
            help="With --trust-forwarded: how many proxies in front append to "
            "X-Forwarded-For (the client is that many entries from the right).",
        ),
        _timeout(
            "--idle-timeout", 30.0, "Seconds a connection may stay silent both ways before it is closed."
        ),
        _timeout(
            "--request-timeout", 60.0, "Seconds a request may take to arrive whole before it is answered 408."
        ),
        click.option(
            "--max-body-bytes",
            default=DEFAULT_MAX_BODY_BYTES,
            type=click.IntRange(1 << 20, 1 << 30),
            help="Largest request body a worker buffers; beyond it 413, nothing kept (at the first "
            "body bytes when Content-Length says so, and the connection closed).",
        ),
        click.option(
            "--public-url",
            envvar="TRACKER_PUBLIC_URL",
            default="",
            show_default=False,
            callback=_public_url,
            help="The tracker's public base URL, http(s)://HOST[:PORT][/PATH] (e.g. "
            "https://tracker.example.org): projects.json builds its leaderboard URLs from it and "
            "never from the Host header. Default: none; then a Host header that is a plain "
            "host[:port] is used, and anything else gives relative URLs.",
        ),
        click.option(
            "--live-url",
            envvar="TRACKER_LIVE_URL",
            default=None,
            help="Where the leaderboard page finds the live feed: ws://HOST:PORT, /PATH or :PORT "
            "(default: the next port up).",
        ),
        click.option(
            "--metrics-token",
            envvar="TRACKER_METRICS_TOKEN",
            default="",
            show_default=False,
            help="Bearer token that shows /metrics for every project (default: none; only "
            "projects listed as public are shown).",
        ),
        segments_dir_option(
            "The admin API reads the archived done log there. Default: with run DATA_DIR/segments, "
            "with serve none."
        ),
        click.option(
            "--memory-guard-percent",
            envvar="TRACKER_MEMORY_GUARD_PERCENT",
            default=DEFAULT_MEMORY_GUARD_PERCENT,
            type=click.IntRange(1, 100),
            help="Backfeed answers 503 above this share of Redis's maxmemory.",
        ),
        _registry_bound(
            "--warriors-max",
            hq.MAX_WARRIORS,
            "Warriors the HQ registry holds at most; past it registrations store nothing.",
        ),
        _registry_bound(
            "--registrations-per-hour",
            hq.REGISTRATIONS_PER_HOUR,
            "Warrior registrations one address (an IPv6 /64) may make an hour.",
        ),
        click.option(
            "--public-cache-max-age",
            "public_cache_max_age_s",
            envvar="TRACKER_PUBLIC_CACHE_MAX_AGE",
            default=1.0,
            type=click.FloatRange(0.1, 300),
            help="Seconds an anonymous aggregate (/metrics without a token, the front page, "
            "projects.json, stats.json) may be served old; one process renders them "
            "(docs/operations.md, Anonymous aggregates).",
        ),
        click.option(
            "--access-log/--no-access-log",
            envvar="TRACKER_ACCESS_LOG",
            default=False,
            help="Log one line per request (method, path without query or secrets, status, "
            "milliseconds, client) as tracker.access.",
        ),
        log_level_option,
    ]
    for option in reversed(options):
        f = option(f)
    return f


def server_settings(options: dict, segments_dir: Path | None, live_url: str | None):
    """The AppConfig and Limits for the API workers from the options of run or serve."""
    from tracker_api.cli import redis_secret
    from tracker_api.server import Limits
    from tracker_api.web.config import AppConfig

    # Before the workers fork: they show the parent's title.
    redis_secret.hide_secret_from_command_line(
        options["metrics_token"], "metrics token", "TRACKER_METRICS_TOKEN"
    )

    config = AppConfig(
        trust_forwarded=options["trusted_proxies"] if options["trust_forwarded"] else 0,
        live_url=live_url or "",
        metrics_token=options["metrics_token"],
        segments_dir=segments_dir,
        memory_guard_percent=options["memory_guard_percent"],
        warriors_max=options["warriors_max"],
        registrations_per_hour=options["registrations_per_hour"],
        public_url=options["public_url"],
        public_cache_max_age_s=options["public_cache_max_age_s"],
    )
    limits = Limits(
        idle_timeout_s=options["idle_timeout_s"],
        request_timeout_s=options["request_timeout_s"],
        max_body_bytes=options["max_body_bytes"],
        body_budget_bytes=2 * options["max_body_bytes"],
    )
    return config, limits


def serve(redis_url: str, options: dict, config, limits, ready=None) -> None:
    """Run the API workers; READY(port) once they listen."""
    from tracker_api.server import serve

    host, port = options["host"], options["port"]
    with bind_failures(host, port, "--port"):
        serve(redis_url, host, port, options["workers"], config=config, limits=limits, ready=ready)
