"""The process commands: `tracker run` (everything on one machine), `serve`, `live`, `maintain`."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from tracker_api.cli import output, redis_secret, server_options, webhooks
from tracker_api.cli.root import context, globals_, main, segments_dir_option
from tracker_api.web import redact
from tracker_core.infra import processes
from tracker_core.infra.supervision import Backoff, Supervisor

DEMO_PROJECT = "demo"
REDIS_URL_VARIABLE = "TRACKER_REDIS_URL"  # the root group's --redis-url reads it
log = logging.getLogger("tracker.run")


def load_demo(ctx, count: int = 1000) -> None:
    """Create the demo project with COUNT items and an upload target, unless it exists."""
    from tracker_core.admin import item_verbs, project_verbs
    from tracker_core.admin.errors import Conflict

    try:
        project_verbs.create(
            ctx, DEMO_PROJECT, {"title": "Demo project", "description": "A project to try the tracker with."}
        )
    except Conflict:
        return
    item_verbs.add(ctx, DEMO_PROJECT, (f"demo-item-{i:06d}" for i in range(count)))
    project_verbs.set_upload_target(ctx, DEMO_PROJECT, "rsync://127.0.0.1/demo/:downloader/", "active")


@main.command(prints=False)
@server_options.serve_options
@click.option("--demo", is_flag=True, help="Create a demo project with 1,000 items.")
@click.option(
    "--live-port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Port of the live leaderboard feed (default: --port + 1; 0: no feed).",
)
def run(demo, live_port, **options):
    """Run the tracker: the embedded Redis (unless --redis-url), API workers, live feed, maintain."""
    from tracker_api.cli import runlock
    from tracker_api.web import logs
    from tracker_core.infra.embedded import EmbeddedRedis

    logs.setup(options["log_level"], options["access_log"])
    g = globals_()
    host, port = options["host"], options["port"]
    live_port = port + 1 if live_port is None else live_port
    # Held until this process dies (even by kill -9): one run per data directory. Taken before
    # the port checks: a second run on the same directory (and so, likely, the same ports) must
    # hear that the directory is busy, not that its port is.
    runlock.lock_data_dir(g.data_dir)
    server_options.ensure_port_free(host, port, "--port")
    server_options.ensure_port_free(host, live_port, "--live-port")
    redact.install()
    embedded = live = maintainer = None
    if not g.explicit_redis:
        embedded = EmbeddedRedis(Path(g.data_dir) / "redis").start()
    try:
        if demo:
            load_demo(context())
        # The admin API reads the done log's segment files where this maintainer writes them.
        segments_dir = g.segments_dir(options["segments_dir"])
        live_url = options["live_url"]
        level = options["log_level"]
        maintainer = _start_maintain_process(g.redis_url, g.data_dir, options["segments_dir"], level)
        if live_port:
            live = _start_live_process(g.redis_url, host, live_port, level)
            if live_url is None and live_port != port + 1:  # the page looks one port up unless told
                live_url = f":{live_port}"
        config, limits = server_options.server_settings(options, segments_dir, live_url)
        server_options.serve(
            g.redis_url, options, config, limits, ready=lambda bound: _log_where(g, host, bound, demo)
        )
    finally:
        processes.stop(maintainer, timeout_s=15)  # crash-safe by design: a plain stop is enough
        processes.stop(live)
        if embedded is not None:
            embedded.stop()


def _log_where(g, host: str, port: int, demo: bool) -> None:
    """Say where the pages are and how to get into the admin ones (once the API listens)."""
    base = f"http://{server_options.reachable_host(host)}:{port}"
    also = " (listening on all addresses)" if server_options.listens_everywhere(host) else ""
    log.info("leaderboards at %s/%s%s", base, f"{DEMO_PROJECT}/" if demo else "", also)
    log.info("admin pages at %s/admin (sign in with an admin token)", base)
    log.info("make an admin token with: %s", token_command(g.redis_url, g.data_dir, g.explicit_redis))


def token_command(redis_url: str, data_dir: str, explicit_redis: bool) -> str:
    """The shell command that makes an admin token on this run's Redis.

    A URL with a password is named by the variable that holds it, never written out: the log
    would redact it (and a command with *** in it does not work) or, unredacted, keep it.
    """
    create = ["admin", "token", "create"]
    command = shlex.join(_self_command())
    if not explicit_redis:
        return f"{command} {shlex.join(['--data-dir', data_dir, *create])}"
    if redact.redact(redis_url) != redis_url:
        # The note is a shell comment: the whole line still pastes into a shell as it is. The
        # variable goes into the command's environment (a shell variable need not be exported),
        # not onto its command line, where `--redis-url "$VAR"` would show the password.
        return (
            f'{REDIS_URL_VARIABLE}="${REDIS_URL_VARIABLE}" {command} {shlex.join(create)}'
            f"  # {REDIS_URL_VARIABLE} must hold the Redis URL"
        )
    return f"{command} {shlex.join(['--redis-url', redis_url, *create])}"


def _self_command() -> list[str]:
    """How this `tracker` was started: its script, or the interpreter with -m."""
    script = sys.argv[0] if sys.argv else ""
    if Path(script).name == "tracker":
        return [script]
    return [sys.executable, "-m", "tracker_api.cli"]


@dataclass(frozen=True)
class TrackerChild:
    """A `tracker` child process on the same Redis: its command line and its environment.

    The Redis URL travels in the environment (TRACKER_REDIS_URL, which the root group reads),
    never on the command line: any user of the machine can read a command line in the process
    list, while /proc/PID/environ is readable by the process's owner only. It holds the password
    already: a password file the parent was given is not read again.
    """

    argv: list[str]
    env: dict[str, str]

    @classmethod
    def of(cls, redis_url: str, data_dir: str | None, *args: str) -> TrackerChild:
        argv = [sys.executable, "-m", "tracker_api.cli"]
        if data_dir is not None:
            argv += ["--data-dir", data_dir]
        env = {**os.environ, REDIS_URL_VARIABLE: redis_url}
        env.pop(redis_secret.PASSWORD_FILE_VARIABLE, None)
        return cls([*argv, *args], env)

    def start(self):
        return processes.start(self.argv, env=self.env)


def _start_maintain_process(redis_url: str, data_dir: str, segments_dir: str | None, log_level: str):
    """Start `tracker maintain --supervise` (offloading, with a lease, so every node may run one):
    a small supervisor that restarts the maintainer whenever it dies."""
    extra = ["--segments-dir", segments_dir] if segments_dir else []
    return TrackerChild.of(
        redis_url, data_dir, "maintain", "--supervise", "--log-level", log_level, *extra
    ).start()


def _supervise_option(what: str):
    """--supervise, for the processes `tracker run` starts beside the API workers."""
    return click.option(
        "--supervise",
        is_flag=True,
        help=f"Run {what} in a child process and restart it whenever it dies (what `tracker run` does).",
    )


def _start_live_process(redis_url: str, host: str, port: int, log_level: str):
    """Start `tracker live --supervise` beside the API workers (its own process: asyncio, not
    bjoern), restarted as the maintainer is whenever it dies."""
    return TrackerChild.of(
        redis_url, None, "live", "--supervise", "--log-level", log_level,
        "--host", host, "--port", str(port),
    ).start()  # fmt: skip


@main.command(prints=False)
@click.option("--host", default="127.0.0.1", help="Address to bind.")
@click.option("--port", default=8081, type=click.IntRange(0, 65535), help="Port of the feed.")
@click.option(
    "--interval",
    default=0.5,
    type=click.FloatRange(0.05, 60),
    help="Seconds between updates of one project (updates are coalesced).",
)
@_supervise_option("the feed")
@server_options.log_level_option
def live(host, port, interval, supervise, log_level):
    """Run the live leaderboard feed (websockets at ws://HOST:PORT/PROJECT)."""
    import tracker_api.public.live
    from tracker_api.web import logs

    logs.setup(log_level)
    if supervise:
        args = ["--log-level", log_level, "--host", host, "--port", str(port), "--interval", str(interval)]
        _supervise("live", TrackerChild.of(globals_().redis_url, None, "live", *args))
        return
    with server_options.bind_failures(host, port, "--port"):
        tracker_api.public.live.run(globals_().redis_url, host, port, interval)


@main.command(prints=False)
@server_options.serve_options
def serve(**options):
    """Run the API workers only, against the given Redis.

    Give the Redis URL in TRACKER_REDIS_URL (as the systemd units do, from an environment file)
    or as `tracker --redis-url URL serve` without a password and the password in a file with
    `--redis-password-file PATH` (TRACKER_REDIS_PASSWORD_FILE): every local user can read a
    command line, and the workers inherit it. A password in --redis-url is masked in the
    process titles, with a warning.
    """
    from tracker_api.web import logs

    logs.setup(options["log_level"], options["access_log"])
    g = globals_()
    if not g.explicit_redis:
        raise click.UsageError("serve needs --redis-url or TRACKER_REDIS_URL")
    segments_dir = Path(options["segments_dir"]) if options["segments_dir"] else None
    config, limits = server_options.server_settings(options, segments_dir, options["live_url"])
    server_options.serve(g.redis_url, options, config, limits)


@main.command()
@segments_dir_option()
@click.option("--interval", default=1.0, type=click.FloatRange(0.05, 3600), help="Seconds between passes.")
@click.option("--once", is_flag=True, help="Make one pass, print what it did and exit.")
@_supervise_option("the maintainer")
@server_options.log_level_option
@webhooks.maintain_options
def maintain(segments_dir, interval, once, supervise, log_level, **webhook_options):
    """Offload each queue (and done, with done_mode=offload) beyond the project's high watermark
    to disk, refill below the low one (at once when a claim finds the queue low: a thread waits
    for those asks), hold queued items that a changed limit now matches, and keep the statistics
    rolled up. Safe on several nodes at once (a lease per project)."""
    import signal
    import threading

    from tracker_api.web import logs
    from tracker_core.maintainer import maintenance
    from tracker_core.offload.lease import default_holder

    logs.setup(log_level)
    g = globals_()
    if supervise:
        args = [
            "--interval",
            str(interval),
            "--log-level",
            log_level,
            *webhooks.maintain_args(webhook_options),
        ]
        if segments_dir:
            args += ["--segments-dir", segments_dir]
        _supervise("maintain", TrackerChild.of(g.redis_url, g.data_dir, "maintain", *args))
        return
    from tracker_core.admin import limit_verbs, upgrades

    ctx = context()
    log = logging.getLogger("tracker.maintain")
    # Blocks stored before the block index existed are enforced only once indexed.
    reindexed = limit_verbs.reindex_blocks_if_missing(ctx)["projects"]
    if reindexed:
        log.info("indexed the blocks of %d project(s)", reindexed)
    dropped = upgrades.drop_reclaim_index(ctx)["dropped"]
    if dropped:
        log.info("dropped the reclaim index of %d project(s): `out` is scored by due time", dropped)
    padded = upgrades.pad_hashes(ctx)["padded"]
    if padded:
        log.info("made the settings and stats hashes of %d project(s) hashtables", padded)
    holder = default_holder()
    notifier = webhooks.notifier(ctx.conn, holder, webhook_options)
    maintainer = maintenance.Maintainer(ctx.conn, g.segments_dir(segments_dir), holder, notifier=notifier)
    if once:
        try:
            output.emit(maintainer.pass_once())
        finally:
            maintainer.release()
        return
    stop = threading.Event()

    def on_signal(*_):  # finish (or abandon: crash-safe) the pass, give the leases up, exit
        if stop.is_set():
            raise SystemExit(0)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    maintainer.run(interval, stop)


# A child (maintainer, live feed) that ran this long is healthy: the next restart waits the first
# second again; one that keeps dying sooner waits twice as long each time, up to this.
RESTART_MAX_S = 60.0


def _supervise(name: str, child: TrackerChild) -> None:
    """Run CHILD (`tracker maintain` or `tracker live`); restart it after a back-off whenever it
    exits, until SIGTERM or SIGINT.

    A process of its own beside the API workers, so that a child that dies is seen and
    restarted without touching the server's own supervision of its workers.
    """
    supervisor = Supervisor(log=logging.getLogger(f"tracker.{name}").warning)
    supervisor.stop_on_signals()
    backoff = Backoff(first_s=1.0, min_s=1.0, max_s=RESTART_MAX_S, healthy_after_s=RESTART_MAX_S)
    supervisor.add(name, lambda: child.start().pid, backoff)
    supervisor.run()
