"""The process commands: `tracker run` (everything on one machine), `serve`, `live`, `maintain`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracker_api.cli import output, server_options
from tracker_api.cli.root import context, globals_, main, segments_dir_option
from tracker_core import processes

DEMO_PROJECT = "demo"


def load_demo(ctx, count: int = 1000) -> None:
    """Create the demo project with COUNT items and an upload target, unless it exists."""
    from tracker_core.admin import items, projects
    from tracker_core.admin.errors import Conflict

    try:
        projects.create(
            ctx, DEMO_PROJECT, {"title": "Demo project", "description": "A project to try the tracker with."}
        )
    except Conflict:
        return
    items.add(ctx, DEMO_PROJECT, (f"demo-item-{i:06d}" for i in range(count)))
    projects.set_upload_target(ctx, DEMO_PROJECT, "rsync://127.0.0.1/demo/:downloader/", "active")


@main.command()
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
    from tracker_api import redact, runlock
    from tracker_core.embedded import EmbeddedRedis

    g = globals_()
    host, port = options["host"], options["port"]
    live_port = port + 1 if live_port is None else live_port
    server_options.ensure_port_free(host, port, "--port")
    server_options.ensure_port_free(host, live_port, "--live-port")
    redact.install()
    # Held until this process dies (even by kill -9): one run per data directory.
    runlock.lock_data_dir(g.data_dir)
    embedded = live = maintainer = None
    if not g.explicit_redis:
        embedded = EmbeddedRedis(Path(g.data_dir) / "redis").start()
        click.echo(f"tracker: embedded Redis at {embedded.url}", err=True)
    try:
        if demo:
            load_demo(context())
            click.echo(f"tracker: demo project at http://{host}:{port}/{DEMO_PROJECT}/", err=True)
        # The admin API reads the done log's segment files where this maintainer writes them.
        segments_dir = g.segments_dir(options["segments_dir"])
        live_url = options["live_url"]
        maintainer = _start_maintain_process(g.redis_url, g.data_dir, options["segments_dir"])
        if live_port:
            live = _start_live_process(g.redis_url, host, live_port)
            if live_url is None and live_port != port + 1:  # the page looks one port up unless told
                live_url = f":{live_port}"
        config, limits = server_options.server_settings(options, segments_dir, live_url)
        server_options.serve(g.redis_url, options, config, limits)
    finally:
        processes.stop(maintainer, timeout_s=15)  # crash-safe by design: a plain stop is enough
        processes.stop(live)
        if embedded is not None:
            embedded.stop()


def _tracker_argv(redis_url: str, data_dir: str | None, *args: str) -> list[str]:
    """The command line of a `tracker` child process on the same Redis."""
    argv = [sys.executable, "-m", "tracker_api.cli", "--redis-url", redis_url]
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    return [*argv, *args]


def _start_maintain_process(redis_url: str, data_dir: str, segments_dir: str | None):
    """Start `tracker maintain --supervise` (offloading, with a lease, so every node may run one):
    a small supervisor that restarts the maintainer whenever it dies."""
    extra = ["--segments-dir", segments_dir] if segments_dir else []
    return processes.start(_tracker_argv(redis_url, data_dir, "maintain", "--supervise", *extra))


def _start_live_process(redis_url: str, host: str, port: int):
    """Start `tracker live` beside the API workers (its own process: asyncio, not bjoern)."""
    return processes.start(_tracker_argv(redis_url, None, "live", "--host", host, "--port", str(port)))


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", default=8081, show_default=True, type=click.IntRange(0, 65535), help="Port of the feed."
)
@click.option(
    "--interval",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0.05, 60),
    help="Seconds between updates of one project (updates are coalesced).",
)
def live(host, port, interval):
    """Run the live leaderboard feed (websockets at ws://HOST:PORT/PROJECT)."""
    from tracker_api import live as live_mod

    with server_options.bind_failures(host, port, "--port"):
        live_mod.run(globals_().redis_url, host, port, interval)


@main.command()
@server_options.serve_options
def serve(**options):
    """Run the API workers only, against the given Redis."""
    g = globals_()
    if not g.explicit_redis:
        raise click.UsageError("serve needs --redis-url or TRACKER_REDIS_URL")
    segments_dir = Path(options["segments_dir"]) if options["segments_dir"] else None
    config, limits = server_options.server_settings(options, segments_dir, options["live_url"])
    server_options.serve(g.redis_url, options, config, limits)


@main.command()
@segments_dir_option()
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.05, 3600),
    help="Seconds between passes.",
)
@click.option("--once", is_flag=True, help="Make one pass, print what it did and exit.")
@click.option(
    "--supervise",
    is_flag=True,
    help="Run the maintainer in a child process and restart it whenever it dies (what `tracker run` does).",
)
@output.json_option
def maintain(segments_dir, interval, once, supervise):
    """Offload each queue (and done, with done_mode=offload) beyond the project's high watermark
    to disk, refill below the low one, hold queued items that a changed limit now matches, and
    keep the statistics rolled up. Safe on several nodes at once (a lease per project)."""
    import signal
    import threading

    from tracker_core import offload

    g = globals_()
    if supervise:
        args = ["--interval", str(interval)]
        if segments_dir:
            args += ["--segments-dir", segments_dir]
        _supervise_maintain(g.redis_url, g.data_dir, args)
        return
    from tracker_core.admin import limits

    ctx = context()
    # Blocks stored before the block index existed are enforced only once indexed.
    reindexed = limits.reindex_blocks_if_missing(ctx)["projects"]
    if reindexed:
        click.echo(f"tracker: indexed the blocks of {reindexed} project(s)", err=True)
    maintainer = offload.Maintainer(
        ctx.conn, g.segments_dir(segments_dir), log=lambda line: click.echo(line, err=True)
    )
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


# A maintainer that ran this long is healthy: the next restart waits the first second again;
# one that keeps dying sooner waits twice as long each time, up to this.
MAINTAIN_RESTART_MAX_S = 60.0


def _supervise_maintain(redis_url: str, data_dir: str, args: list[str]) -> None:
    """Run `tracker maintain ARGS` as a child; restart it after a back-off whenever it exits.

    A process of its own beside the API workers, so that a maintainer that dies is seen and
    restarted without touching the server's own supervision of its workers.
    """
    supervisor = processes.Supervisor()
    supervisor.stop_on_signals()
    backoff = processes.Backoff(
        first_s=1.0, min_s=1.0, max_s=MAINTAIN_RESTART_MAX_S, healthy_after_s=MAINTAIN_RESTART_MAX_S
    )
    supervisor.add(
        "maintain",
        lambda: processes.start(_tracker_argv(redis_url, data_dir, "maintain", *args)).pid,
        backoff,
    )
    supervisor.run()
