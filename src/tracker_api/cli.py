"""The ``tracker`` command: run the server, manage projects, items, blocks and targets."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from tracker_core import settings as settings_mod
from tracker_core.admin import Admin, AdminError
from tracker_core.embedded import EmbeddedRedis

DEFAULT_DATA_DIR = "var"
QUEUE_HELP = "todo, secondary, backfeed, redo or downloader:NAME"


def default_redis_url(data_dir: str) -> str:
    return EmbeddedRedis(Path(data_dir) / "redis").url


def _admin(ctx) -> Admin:
    return Admin.from_url(ctx.obj["redis_url"])


def _fail(exc: Exception):
    raise click.UsageError(str(exc))


@click.group()
@click.option("--redis-url", envvar="TRACKER_REDIS_URL", default=None,
              help="Redis to use: redis://HOST:PORT/DB, unix:///PATH, "
                   "redis+sentinel://HOST:PORT,.../SERVICE or redis+cluster://HOST:PORT,... "
                   "Default: the embedded one.")
@click.option("--data-dir", envvar="TRACKER_DATA_DIR", default=DEFAULT_DATA_DIR, show_default=True,
              help="Where the embedded Redis keeps its data.")
@click.pass_context
def main(ctx, redis_url, data_dir):
    """A tracker for distributed archiving: hands items to warriors and takes them back."""
    ctx.ensure_object(dict)
    ctx.obj["data_dir"] = data_dir
    ctx.obj["explicit_redis"] = redis_url is not None
    ctx.obj["redis_url"] = redis_url or default_redis_url(data_dir)


def _serve_options(f):
    f = click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")(f)
    f = click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))(f)
    f = click.option("--workers", default=os.cpu_count() or 1, show_default=True,
                     type=click.IntRange(1, 256), help="bjoern processes sharing the port.")(f)
    f = click.option("--trust-forwarded", is_flag=True,
                     help="Take the client IP from X-Forwarded-For (behind a load balancer).")(f)
    return f


DEMO_PROJECT = "demo"


def load_demo(admin: Admin, count: int = 1000) -> None:
    """Create the demo project with COUNT items and an upload target, unless it exists."""
    if admin.create_project(DEMO_PROJECT, title="Demo project",
                            description="A project to try the tracker with."):
        for _ in admin.add_items(DEMO_PROJECT, (f"demo-item-{i:06d}" for i in range(count))):
            pass
        admin.set_upload_target(DEMO_PROJECT, "rsync://127.0.0.1/demo/:downloader/", "active")


@main.command()
@_serve_options
@click.option("--demo", is_flag=True, help="Create a demo project with 1,000 items.")
@click.pass_context
def run(ctx, host, port, workers, trust_forwarded, demo):
    """Run the tracker: the embedded Redis (unless --redis-url) and the API workers."""
    from tracker_api.server import serve

    embedded = None
    if not ctx.obj["explicit_redis"]:
        embedded = EmbeddedRedis(Path(ctx.obj["data_dir"]) / "redis").start()
        click.echo(f"tracker: embedded Redis at {embedded.url}", err=True)
    try:
        if demo:
            load_demo(_admin(ctx))
            click.echo(f"tracker: demo project at http://{host}:{port}/{DEMO_PROJECT}/", err=True)
        serve(ctx.obj["redis_url"], host, port, workers, trust_forwarded)
    finally:
        if embedded is not None:
            embedded.stop()


@main.command()
@_serve_options
@click.pass_context
def serve(ctx, host, port, workers, trust_forwarded):
    """Run the API workers only, against the given Redis."""
    from tracker_api.server import serve as serve_
    if not ctx.obj["explicit_redis"]:
        raise click.UsageError("serve needs --redis-url or TRACKER_REDIS_URL")
    serve_(ctx.obj["redis_url"], host, port, workers, trust_forwarded)


@main.group()
def project():
    """Create, change and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="")
@click.pass_context
def project_create(ctx, slug, title):
    """Create project SLUG with default settings."""
    try:
        created = _admin(ctx).create_project(slug, **({"title": title} if title else {}))
    except (AdminError, ValueError) as exc:
        _fail(exc)
    if not created:
        raise click.UsageError(f"project {slug!r} already exists")
    click.echo(f"created project {slug}")


@project.command("set")
@click.argument("slug")
@click.argument("assignments", nargs=-1, required=True)
@click.pass_context
def project_set(ctx, slug, assignments):
    """Change settings: tracker project set SLUG KEY=VALUE... (see `project settings`)."""
    values = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep:
            raise click.UsageError(f"expected KEY=VALUE, got {assignment!r}")
        values[name] = value
    try:
        age = _admin(ctx).set_settings(slug, values)
    except (AdminError, ValueError) as exc:
        _fail(exc)
    click.echo(f"settings of {slug} now at age {age}")


@project.command("show")
@click.argument("slug")
@click.pass_context
def project_show(ctx, slug):
    """Show a project's settings, upload targets and blocks as JSON."""
    try:
        click.echo(json.dumps(_admin(ctx).show_project(slug), indent=2, sort_keys=True))
    except AdminError as exc:
        _fail(exc)


@project.command("list")
@click.pass_context
def project_list(ctx):
    """List the projects."""
    for name in _admin(ctx).projects():
        click.echo(name)


@project.command("settings")
def project_settings():
    """Describe every setting and its default."""
    for name, (_, default, meaning) in settings_mod.SETTINGS.items():
        click.echo(f"{name:28} default {default!r:10} {meaning}")


@main.group()
def items():
    """Queue items."""


def _lines(stream):
    for raw in stream:
        name = raw.rstrip("\r\n")
        if name:
            yield name


@items.command("add")
@click.argument("slug")
@click.argument("source", type=click.File("r", encoding="utf-8", errors="surrogateescape", lazy=False))
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@click.option("--batch", default=5000, show_default=True, type=click.IntRange(1, 100000))
@click.pass_context
def items_add(ctx, slug, source, queue, batch):
    """Add one item per line of SOURCE (a file, or - for standard input)."""
    admin = _admin(ctx)
    added = duplicates = 0
    size = None
    if source is not sys.stdin and hasattr(source, "fileno"):
        try:
            size = os.fstat(source.fileno()).st_size
        except OSError:
            size = None
    try:
        with click.progressbar(length=size or 0, label=f"adding to {slug}:{queue}",
                               file=sys.stderr, show_pos=size is None) as bar:
            batches = admin.add_items(slug, _lines(source), queue=queue, batch=batch)
            for a, d in batches:
                added += a
                duplicates += d
                if size:
                    # Text-mode tell() is disabled while iterating; the byte buffer below knows.
                    bar.pos = min(size, source.buffer.tell())
                    bar.update(0)
                else:
                    bar.update(a + d)
    except AdminError as exc:
        _fail(exc)
    click.echo(json.dumps({"added": added, "duplicates": duplicates}))


@main.command()
@click.argument("slug")
@click.pass_context
def status(ctx, slug):
    """Print the size of every queue, out and done, as JSON."""
    try:
        click.echo(json.dumps(_admin(ctx).status(slug), indent=2, sort_keys=True))
    except AdminError as exc:
        _fail(exc)


@main.command()
@click.argument("entry")
@click.option("--project", default=None, help="Block in this project only (default: all).")
@click.option("--remove", is_flag=True, help="Lift the block.")
@click.pass_context
def block(ctx, entry, project, remove):
    """Block ip:ADDRESS or name:DOWNLOADER (403 on request)."""
    try:
        _admin(ctx).block(entry, project, remove)
    except AdminError as exc:
        _fail(exc)
    click.echo(("unblocked " if remove else "blocked ") + entry)


@main.command("upload-target")
@click.argument("slug")
@click.argument("url")
@click.option("--state", type=click.Choice(["active", "inactive", "remove"]), default="active")
@click.pass_context
def upload_target(ctx, slug, url, state):
    """Add, deactivate or remove an upload target (':downloader' is replaced per warrior)."""
    try:
        _admin(ctx).set_upload_target(slug, url, "" if state == "remove" else state)
    except AdminError as exc:
        _fail(exc)
    click.echo(f"{url}: {state}")
