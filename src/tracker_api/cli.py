"""The ``tracker`` command: run the server, manage projects, items, blocks and targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from tracker_core import settings as settings_mod
from tracker_core.admin import Admin, AdminError
from tracker_core.embedded import EmbeddedRedis, die_with_parent

DEFAULT_DATA_DIR = "var"
QUEUE_HELP = "todo, secondary, backfeed, redo or downloader:NAME"


def default_redis_url(data_dir: str) -> str:
    return EmbeddedRedis(Path(data_dir) / "redis").url


def _admin(ctx) -> Admin:
    return Admin.from_url(ctx.obj["redis_url"])


def _fail(exc: Exception):
    raise click.UsageError(str(exc))


def _audit(admin: Admin, action: str, project: str | None = None, **detail) -> None:
    """Write a change made with the CLI to the audit log (actor "cli"), as the API does."""
    from tracker_core import audit

    audit.record(admin.r, audit.CLI_ACTOR, action, project, **detail)


GLOBAL_OPTIONS = ("--redis-url", "--data-dir")


class _Commands(click.Group):
    """The command group: an admin refusal (AdminError) in any command is a one-line error, exit 2.

    The global options are also taken after the command (`tracker run --redis-url URL`, as
    operators write it): they are moved to the front before parsing. Nothing after `--` moves.
    """

    def parse_args(self, ctx, args):
        front, rest, i = [], [], 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                rest += args[i:]
                break
            if arg.split("=", 1)[0] in GLOBAL_OPTIONS:
                width = 1 if "=" in arg or i + 1 == len(args) else 2
                front += args[i : i + width]
                i += width
                continue
            rest.append(arg)
            i += 1
        return super().parse_args(ctx, front + rest)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except AdminError as exc:
            raise click.UsageError(str(exc)) from None


@click.group(cls=_Commands)
@click.option(
    "--redis-url",
    envvar="TRACKER_REDIS_URL",
    default=None,
    help="Redis to use: redis://HOST:PORT/DB, unix:///PATH, "
    "redis+sentinel://HOST:PORT,.../SERVICE or redis+cluster://HOST:PORT,... "
    "Default: the embedded one.",
)
@click.option(
    "--data-dir",
    envvar="TRACKER_DATA_DIR",
    default=DEFAULT_DATA_DIR,
    show_default=True,
    help="Where the embedded Redis keeps its data.",
)
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
    f = click.option(
        "--workers",
        default=os.cpu_count() or 1,
        show_default=True,
        type=click.IntRange(1, 256),
        help="bjoern processes sharing the port.",
    )(f)
    f = _trusted_proxies_as_trust_forwarded(f)
    f = click.option(
        "--trust-forwarded",
        is_flag=True,
        help="Take the client IP from X-Forwarded-For (behind a load balancer): "
        "the entry the trusted proxies appended, never one a client sent.",
    )(f)
    f = click.option(
        "--trusted-proxies",
        envvar="TRACKER_TRUSTED_PROXIES",
        default=1,
        show_default=True,
        type=click.IntRange(1, 16),
        help="With --trust-forwarded: how many proxies in front append to "
        "X-Forwarded-For (the client is that many entries from the right).",
    )(f)
    f = _connection_limits(f)
    f = click.option(
        "--idle-timeout",
        "idle_timeout_s",
        default=30.0,
        show_default=True,
        type=click.FloatRange(1, 3600),
        help="Seconds a connection may stay silent both ways before it is closed.",
    )(f)
    f = click.option(
        "--request-timeout",
        "request_timeout_s",
        default=60.0,
        show_default=True,
        type=click.FloatRange(1, 3600),
        help="Seconds a request may take to arrive whole before it is answered 408.",
    )(f)
    f = click.option(
        "--max-body-bytes",
        default=(64 << 20) + (64 << 10),
        show_default=True,
        type=click.IntRange(1 << 20, 1 << 30),
        help="Largest request body a worker buffers; beyond it 413, nothing kept.",
    )(f)
    return f


def _connection_limits(f):
    """Hand the command its connection limits as one `limits` value for the server."""
    import functools

    @functools.wraps(f)
    def command(*args, idle_timeout_s, request_timeout_s, max_body_bytes, **kwargs):
        from tracker_api.server import Limits

        limits = Limits(
            idle_timeout_s=idle_timeout_s,
            request_timeout_s=request_timeout_s,
            max_body_bytes=max_body_bytes,
            body_budget_bytes=2 * max_body_bytes,
        )
        return f(*args, limits=limits, **kwargs)

    return command


def _trusted_proxies_as_trust_forwarded(f):
    """Hand the command trust_forwarded as a number of trusted proxies (0: none, the peer is
    the client), so run and serve pass one value on to the server unchanged."""
    import functools

    @functools.wraps(f)
    def command(*args, trust_forwarded, trusted_proxies, **kwargs):
        return f(*args, trust_forwarded=trusted_proxies if trust_forwarded else 0, **kwargs)

    return command


DEMO_PROJECT = "demo"


def load_demo(admin: Admin, count: int = 1000) -> None:
    """Create the demo project with COUNT items and an upload target, unless it exists."""
    if admin.create_project(
        DEMO_PROJECT, title="Demo project", description="A project to try the tracker with."
    ):
        for _ in admin.add_items(DEMO_PROJECT, (f"demo-item-{i:06d}" for i in range(count))):
            pass
        admin.set_upload_target(DEMO_PROJECT, "rsync://127.0.0.1/demo/:downloader/", "active")


@main.command()
@_serve_options
@click.option("--demo", is_flag=True, help="Create a demo project with 1,000 items.")
@click.option(
    "--live-port",
    default=None,
    type=click.IntRange(0, 65535),
    help="Port of the live leaderboard feed (default: --port + 1; 0: no feed).",
)
@click.pass_context
def run(ctx, host, port, workers, trust_forwarded, limits, demo, live_port):
    """Run the tracker: the embedded Redis (unless --redis-url), API workers, live feed, maintain."""
    from tracker_api import redact, runlock
    from tracker_api.server import serve

    redact.install()
    try:
        # Held until this process dies (even by kill -9): one run per data directory.
        ctx.obj["data_dir_lock"] = runlock.lock_data_dir(ctx.obj["data_dir"])
    except runlock.DataDirBusy as exc:
        raise click.ClickException(str(exc)) from None
    embedded = live = maintainer = None
    if not ctx.obj["explicit_redis"]:
        embedded = EmbeddedRedis(Path(ctx.obj["data_dir"]) / "redis").start()
        click.echo(f"tracker: embedded Redis at {embedded.url}", err=True)
    try:
        if demo:
            load_demo(_admin(ctx))
            click.echo(f"tracker: demo project at http://{host}:{port}/{DEMO_PROJECT}/", err=True)
        # The admin API reads the done log's segment files where this maintainer writes them.
        os.environ.setdefault("TRACKER_SEGMENTS_DIR", str(_segments_dir(ctx, None)))
        maintainer = _start_maintain_process(ctx.obj["redis_url"], ctx.obj["data_dir"])
        live_port = port + 1 if live_port is None else live_port
        if live_port:
            live = _start_live_process(ctx.obj["redis_url"], host, live_port)
            if live_port != port + 1:  # the page looks one port up unless told (":PORT")
                os.environ["TRACKER_LIVE_URL"] = f":{live_port}"
        serve(ctx.obj["redis_url"], host, port, workers, trust_forwarded, limits=limits)
    finally:
        if maintainer is not None:  # crash-safe by design: a plain terminate is enough
            maintainer.terminate()
            try:
                maintainer.wait(timeout=15)
            except subprocess.TimeoutExpired:
                maintainer.kill()
                maintainer.wait()
        if live is not None:
            live.terminate()
            try:
                live.wait(timeout=10)
            except subprocess.TimeoutExpired:
                live.kill()
                live.wait()
        if embedded is not None:
            embedded.stop()


def _start_maintain_process(redis_url: str, data_dir: str):
    """Start `tracker maintain --supervise` (offloading, with a lease, so every node may run one):
    a small supervisor that restarts the maintainer whenever it dies."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracker_api.cli",
            "--redis-url",
            redis_url,
            "--data-dir",
            data_dir,
            "maintain",
            "--supervise",
        ],
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )


def _start_live_process(redis_url: str, host: str, port: int):
    """Start `tracker live` beside the API workers (its own process: asyncio, not bjoern)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracker_api.cli",
            "--redis-url",
            redis_url,
            "live",
            "--host",
            host,
            "--port",
            str(port),
        ],
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8081, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--interval",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0.05, 60),
    help="Seconds between updates of one project (updates are coalesced).",
)
@click.pass_context
def live(ctx, host, port, interval):
    """Run the live leaderboard feed (websockets at ws://HOST:PORT/PROJECT)."""
    from tracker_api import live as live_mod

    live_mod.run(ctx.obj["redis_url"], host, port, interval)


@main.command()
@_serve_options
@click.pass_context
def serve(ctx, host, port, workers, trust_forwarded, limits):
    """Run the API workers only, against the given Redis."""
    from tracker_api.server import serve as serve_

    if not ctx.obj["explicit_redis"]:
        raise click.UsageError("serve needs --redis-url or TRACKER_REDIS_URL")
    serve_(ctx.obj["redis_url"], host, port, workers, trust_forwarded, limits=limits)


@main.group()
def project():
    """Create, change and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="")
@click.pass_context
def project_create(ctx, slug, title):
    """Create project SLUG with default settings."""
    admin = _admin(ctx)
    values = {"title": title} if title else {}
    try:
        created = admin.create_project(slug, **values)
    except (AdminError, ValueError) as exc:
        _fail(exc)
    if not created:
        raise click.UsageError(f"project {slug!r} already exists")
    _audit(admin, "project.create", slug, settings=values)
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
    admin = _admin(ctx)
    try:
        age = admin.set_settings(slug, values)
    except (AdminError, ValueError) as exc:
        _fail(exc)
    _audit(admin, "project.settings", slug, settings=values)
    click.echo(f"settings of {slug} now at age {age}")


@project.command("show")
@click.argument("slug")
@click.pass_context
def project_show(ctx, slug):
    """Show a project's settings, upload targets and blocks as JSON."""
    click.echo(json.dumps(_admin(ctx).show_project(slug), indent=2, sort_keys=True))


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
    """The item names of STREAM, one a line (blank lines skipped), checked like the API's."""
    from tracker_core import operations

    for number, raw in enumerate(stream, 1):
        name = raw.rstrip("\r\n")
        if name:
            if len(name) > operations.MAX_ITEM_CHARS or "\0" in name:
                raise AdminError(
                    f"line {number}: an item name has 1 to {operations.MAX_ITEM_CHARS} characters and no NUL"
                )
            yield name


@items.command("add")
@click.argument("slug")
@click.argument("source", type=click.File("r", encoding="utf-8", errors="surrogateescape", lazy=False))
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@click.option("--batch", default=5000, show_default=True, type=click.IntRange(1, 100000))
@click.pass_context
def items_add(ctx, slug, source, queue, batch):
    """Add one item per line of SOURCE (a file, or - for standard input)."""
    from tracker_core import operations

    admin = _admin(ctx)
    added = duplicates = 0
    refused: dict = {}  # lines that are not UTF-8: refused one by one, the rest is added
    operations.check_queue(queue)
    size = None
    if source is not sys.stdin and hasattr(source, "fileno"):
        try:
            size = os.fstat(source.fileno()).st_size
        except OSError:
            size = None
    try:
        with click.progressbar(
            length=size or 0, label=f"adding to {slug}:{queue}", file=sys.stderr, show_pos=size is None
        ) as bar:
            batches = admin.add_items(slug, _lines(source), queue=queue, batch=batch, refused=refused)
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
        if added or duplicates:  # earlier batches went in: say so, and audit them
            _audit(
                admin, "items.add", slug, queue=queue, added=added, duplicates=duplicates, stopped=str(exc)
            )
            _fail(AdminError(f"{exc} (stopped: {added} items added before it)"))
        _fail(exc)
    answer = {"added": added, "duplicates": duplicates}
    if refused:
        answer["refused_not_utf8"] = sum(refused.values())
    _audit(admin, "items.add", slug, queue=queue, **answer)
    click.echo(json.dumps(answer))


def _add_redo(total: dict, page: dict) -> dict:
    for field in ("requeued", "from_done", "from_seen", "held", "skipped"):
        total[field] = total.get(field, 0) + page[field]
    reasons = total.setdefault("skipped_by_reason", {})
    for reason, n in page["skipped_by_reason"].items():
        reasons[reason] = reasons.get(reason, 0) + n
    return total


@items.command("redo")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option(
    "--file",
    "source",
    default=None,
    type=click.File("r", encoding="utf-8", errors="surrogateescape", lazy=False),
    help="Item names, one a line (- for standard input).",
)
@click.option("--pattern", default=None, help="Redo every done item matching this Redis glob.")
@click.option("--queue", default="redo", show_default=True, help=QUEUE_HELP)
@click.option(
    "--even-if-offloaded",
    is_flag=True,
    help="Queue seen names found nowhere even when the project has segment files "
    "(one may sit in a segment and be served twice).",
)
@click.pass_context
def items_redo(ctx, slug, names, source, pattern, queue, even_if_offloaded):
    """Re-queue done items, or items the Bloom filter has seen that are nowhere (a bad grab
    script run): NAMES and/or --file, or --pattern over done items. Audited; prints counts."""
    from tracker_core import operations

    if (pattern is not None) == bool(names or source):
        raise click.UsageError("name the items (NAMES or --file), or give --pattern")
    admin = _admin(ctx)
    total: dict = {}
    detail = {"queue": queue, **({"pattern": pattern} if pattern is not None else {})}
    try:
        if pattern is not None:
            cursor = 0
            while True:  # SSCAN pages of done, like the API
                page = operations.redo(
                    admin,
                    slug,
                    pattern=pattern,
                    cursor=cursor,
                    limit=5000,
                    queue=queue,
                    even_if_offloaded=even_if_offloaded,
                )
                _add_redo(total, page)
                cursor = page["cursor"]
                if cursor == 0:
                    break
        else:
            given = list(names) + (list(_lines(source)) if source is not None else [])
            detail["items"] = len(given)
            for start in range(0, len(given), operations.MAX_PAGE):
                batch = given[start : start + operations.MAX_PAGE]
                _add_redo(
                    total,
                    operations.redo(
                        admin, slug, names=batch, queue=queue, even_if_offloaded=even_if_offloaded
                    ),
                )
    except AdminError as exc:
        if total.get("requeued"):  # earlier batches went in: audit them
            _audit(admin, "items.redo", slug, **detail, **total, stopped=str(exc))
        _fail(exc)
    _audit(admin, "items.redo", slug, **detail, **total)
    click.echo(json.dumps(total))


def _printable(name: str) -> str:
    """NAME for one table cell: control characters escaped, so a name cannot break the table."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def _status_detail(place: dict) -> str:
    if place["status"] == "todo":
        return f"limited:{place['limit']}" if place["queue"] == "limited" else place["queue"]
    if place["status"] == "dead":
        return place["reason"]
    if place["status"] == "offloaded":
        return f"segment (from {place['queue']})"
    return ", ".join(f"maybe {where}" for where in place["maybe"]) or "-"


@items.command("status")
@click.argument("slug")
@click.argument("names", nargs=-1, required=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object a line: the item status answer, with the item's name.",
)
@click.pass_context
def items_status(ctx, slug, names, as_json):
    """Where each item is: todo (queue, limit), out (holder, claims), done, dead, offloaded.

    The same answer as GET /P/items/ITEM.json. A name found nowhere prints "-", with "maybe
    offloaded" when the project has segment files (they are not opened)."""
    from tracker_core import operations
    from tracker_core.engine import Engine

    operations.check_items(list(names))
    engine = Engine(ctx.obj["redis_url"])
    places = []
    for name in names:
        place = engine.item_place(slug, name)
        if place is None:
            raise AdminError(f"unknown project {slug!r}")
        places.append(place)
    if as_json:
        for name, place in zip(names, places):
            click.echo(json.dumps({"item": name, **place}))
        return
    rows = [("STATUS", "DETAIL", "DOWNLOADER", "CLAIMS", "ITEM")]
    rows += [
        (
            p["status"] or "-",
            _status_detail(p),
            p["downloader"] or "-",
            "-" if p["claims"] is None else str(p["claims"]),
            _printable(name),
        )
        for name, p in zip(names, places)
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])


@main.command()
@click.argument("slug")
@click.pass_context
def status(ctx, slug):
    """Print the size of every queue, out and done, as JSON."""
    click.echo(json.dumps(_admin(ctx).status(slug), indent=2, sort_keys=True))


@main.command()
@click.argument("entry", required=False)
@click.option("--project", default=None, help="Block in this project only (default: all).")
@click.option("--remove", is_flag=True, help="Lift the block.")
@click.option(
    "--list", "list_", is_flag=True, help="Print the global blocks, or with --project the project's, as JSON."
)
@click.option(
    "--reindex", is_flag=True, help="Rebuild every project's block index (after an upgrade or a repair)."
)
@click.pass_context
def block(ctx, entry, project, remove, list_, reindex):
    """Block ip:ADDRESS, ip:CIDR (10.0.0.0/8, 2001:db8::/32) or name:DOWNLOADER (403 on request).

    A project's own block and a global block of the same entry are kept apart: lifting one
    leaves the other. Projects with ignore_global_blocked=1 see only their own blocks.
    """
    admin = _admin(ctx)
    if list_ or reindex:
        if entry is not None or remove or (reindex and (list_ or project)):
            raise click.UsageError("--list takes only --project; --reindex takes nothing else")
        if reindex:
            done = admin.reindex_blocks()
            _audit(admin, "block.reindex", None, projects=done)
            click.echo(f"reindexed the blocks of {done} projects")
        else:
            click.echo(json.dumps(admin.blocks(project), indent=2, sort_keys=True))
        return
    if entry is None:
        raise click.UsageError("give an ENTRY (ip:ADDRESS, ip:CIDR or name:DOWNLOADER)")
    entry = admin.block(entry, project, remove)
    _audit(admin, "block.remove" if remove else "block.add", project, entry=entry)
    click.echo(("unblocked " if remove else "blocked ") + entry)


@main.command("upload-target")
@click.argument("slug")
@click.argument("url")
@click.option("--state", type=click.Choice(["active", "inactive", "remove"]), default="active")
@click.pass_context
def upload_target(ctx, slug, url, state):
    """Add, deactivate or remove an upload target (':downloader' is replaced per warrior)."""
    admin = _admin(ctx)
    admin.set_upload_target(slug, url, "" if state == "remove" else state)
    _audit(admin, "upload_target", slug, url=url, state="removed" if state == "remove" else state)
    click.echo(f"{url}: {state}")


# -- the admin API's operations, over the same code (tracker_core.operations) ------------------


def _operation(ctx, action: str, project: str | None, fn, *args, **kwargs):
    """Run an operation, audit it as done from the CLI, print its result as JSON."""
    admin = _admin(ctx)
    try:
        result = fn(admin, *args, **kwargs)
    except (AdminError, ValueError) as exc:
        _fail(exc)
    if action:
        _audit(admin, action, project, **(result if isinstance(result, dict) else {"result": result}))
    click.echo(json.dumps(result))
    return result


@project.command("pause")
@click.argument("slug")
@click.pass_context
def project_pause(ctx, slug):
    """Stop handing out items (requests get 404)."""
    from tracker_core import operations

    _operation(ctx, "project.pause", slug, operations.pause, slug, True)


@project.command("resume")
@click.argument("slug")
@click.pass_context
def project_resume(ctx, slug):
    """Hand out items again."""
    from tracker_core import operations

    _operation(ctx, "project.resume", slug, operations.pause, slug, False)


@project.command("delete")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="Really delete the project and all its items.")
@click.pass_context
def project_delete(ctx, slug, yes):
    """Delete a project and its keys (UNLINK, no KEYS)."""
    from tracker_core import operations

    if not yes:
        raise click.UsageError("deleting drops every item of the project: add --yes")
    _operation(
        ctx, "project.delete", slug, lambda a, p: operations.delete_project(a, p) or {"deleted": p}, slug
    )


@main.group()
def queue():
    """Count, sample, clear and move items between queues."""


@queue.command("count")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.pass_context
def queue_count(ctx, slug, name):
    from tracker_core import operations

    _operation(ctx, "", slug, operations.count, slug, name)


@queue.command("sample")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option("--count", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.pass_context
def queue_sample(ctx, slug, name, count):
    from tracker_core import operations

    _operation(ctx, "", slug, operations.sample, slug, name, count)


@queue.command("clear")
@click.argument("slug")
@click.argument("name", metavar="QUEUE")
@click.option("--yes", is_flag=True, help="Really drop every item of the queue.")
@click.pass_context
def queue_clear(ctx, slug, name, yes):
    from tracker_core import operations

    if not yes:
        raise click.UsageError("clearing drops the queue's items: add --yes")
    _operation(ctx, "queue.clear", slug, lambda a, p, q: {"dropped": operations.clear(a, p, q)}, slug, name)


@queue.command("move")
@click.argument("slug")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.option("--pattern", default="*", show_default=True, help="Redis glob on item names.")
@click.pass_context
def queue_move(ctx, slug, source, target, pattern):
    """Move matching items FROM one queue TO another, page by page until done."""
    from tracker_core import operations

    admin = _admin(ctx)
    moved, cursor = 0, 0
    while True:
        page = operations.move(admin, slug, source, target, pattern, cursor, limit=5000)
        moved, cursor = moved + page["moved"], page["cursor"]
        if cursor == 0:
            break
    _audit(admin, "queue.move", slug, source=source, target=target, pattern=pattern, moved=moved)
    click.echo(json.dumps({"moved": moved}))


@main.group()
def claims():
    """List and release claims."""


@claims.command("list")
@click.argument("slug")
@click.option("--cursor", default=0, show_default=True)
@click.option("--count", default=100, show_default=True, type=click.IntRange(1, 10000))
@click.option("--pattern", default="*", show_default=True)
@click.pass_context
def claims_list(ctx, slug, cursor, count, pattern):
    """One page of claims as JSON (continue with the printed cursor until it is 0)."""
    from tracker_core import operations

    _operation(ctx, "", slug, operations.list_claims, slug, cursor, count, pattern)


@claims.command("release")
@click.argument("slug")
@click.option("--downloader", default=None, help="Release the claims this downloader holds.")
@click.option("--older-than", "older_than_s", default=None, type=float, help="Seconds.")
@click.option("--pattern", default=None, help="Release claims of items matching this glob.")
@click.pass_context
def claims_release(ctx, slug, downloader, older_than_s, pattern):
    """Give claims back to todo (one filter), page by page until none is left."""
    from tracker_core import operations

    admin = _admin(ctx)
    released, cursor = 0, 0
    while True:
        page = operations.release(admin, slug, downloader, older_than_s, pattern, cursor, limit=5000)
        released, cursor = released + page["released"], page["cursor"]
        if cursor == 0:
            break
    _audit(
        admin,
        "claims.release",
        slug,
        downloader=downloader,
        older_than_s=older_than_s,
        pattern=pattern,
        released=released,
    )
    click.echo(json.dumps({"released": released}))


@main.group("admin")
def admin_group():
    """Admin tokens, the audit log, the warrior registry and the HQ document (as the admin API)."""


@admin_group.command("audit")
@click.option("--project", default=None, help="This project's log (default: the global one).")
@click.option("--count", default=100, show_default=True, type=click.IntRange(1, 1000))
@click.option("--before", default=None, help="Continue from the 'next' of the previous page.")
@click.pass_context
def admin_audit(ctx, project, count, before):
    """One page of the audit log as JSON, newest first (like GET /api/admin/audit)."""
    from tracker_core import audit

    admin = _admin(ctx)
    try:
        if project is not None:
            admin._keys(project, must_exist=False)  # a name check; a deleted project's log stays
        click.echo(json.dumps(audit.read(admin.r, project, count, before)))
    except (AdminError, ValueError) as exc:
        _fail(exc)


@admin_group.command("warriors")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0, 10**9))
@click.option("--count", default=100, show_default=True, type=click.IntRange(1, 1000))
@click.pass_context
def admin_warriors(ctx, offset, count):
    """Registered warriors by last heartbeat, newest first, and how many are online (a
    heartbeat in the last 25 minutes), as JSON (GET /api/admin/warriors)."""
    from tracker_core import hq

    click.echo(json.dumps(hq.registry(_admin(ctx).r, offset, count)))


@admin_group.command("hq")
@click.argument("assignments", nargs=-1, required=True)
@click.pass_context
def admin_hq(ctx, assignments):
    """Set projects.json's global fields: tracker admin hq KEY=VALUE... (auto_project,
    broadcast_message, seesaw_version)."""
    from tracker_core import operations

    admin = _admin(ctx)
    values = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep:
            raise click.UsageError(f"expected KEY=VALUE, got {assignment!r}")
        values[name] = value
    result = operations.set_hq(admin, values)
    _audit(admin, "hq.set", fields=result["hq"])
    click.echo(json.dumps(result))


@admin_group.group("token")
def admin_token():
    """Create and revoke admin tokens (stored hashed; shown once)."""


@admin_token.command("create")
@click.option(
    "--scope",
    default="*",
    show_default=True,
    help="'*' for a global admin, or a project name for that project's admin.",
)
@click.option("--note", default="", help="Who or what the token is for.")
@click.pass_context
def admin_token_create(ctx, scope, note):
    """Create a token and print it once, as JSON."""
    from tracker_core import tokens

    admin = _admin(ctx)
    try:
        text, record = tokens.create(admin.r, scope, note)
    except tokens.TokenError as exc:
        _fail(exc)
    _audit(admin, "token.create", None if record.is_global else scope, token_id=record.token_id, scope=scope)
    click.echo(json.dumps({"token": text, "token_id": record.token_id, "scope": scope}))


@admin_token.command("list")
@click.pass_context
def admin_token_list(ctx):
    """List the tokens (id, scope, note, creation time; never a secret) as JSON."""
    from tracker_core import tokens

    admin = _admin(ctx)
    click.echo(json.dumps({"tokens": [t.__dict__ for t in tokens.list_tokens(admin.r)]}))


@admin_token.command("revoke")
@click.argument("token_id")
@click.pass_context
def admin_token_revoke(ctx, token_id):
    """Revoke the token with id TOKEN_ID (the part after trk_)."""
    from tracker_core import tokens

    admin = _admin(ctx)
    if not tokens.revoke(admin.r, token_id):
        _fail(ValueError(f"no token {token_id!r}"))
    _audit(admin, "token.revoke", token_id=token_id)
    click.echo(f"revoked {token_id}")


@main.group()
def backfeed():
    """Backfeed: per-project secrets and the Bloom filter that dedups every item."""


@backfeed.group("secret")
def backfeed_secret():
    """Create, list and revoke the secrets grab scripts post backfeed with."""


def _project_keys(admin: Admin, slug: str):
    return admin._keys(slug)


@backfeed_secret.command("create")
@click.argument("slug")
@click.pass_context
def backfeed_secret_create(ctx, slug):
    """Create a secret for SLUG; it is printed once (only its hash is stored)."""
    from tracker_core import operations

    admin = _admin(ctx)
    result = operations.create_backfeed_secret(admin, slug)
    _audit(admin, "backfeed_secret.create", slug, id=result["id"])  # never the secret
    click.echo(json.dumps(result))


@backfeed_secret.command("list")
@click.argument("slug")
@click.pass_context
def backfeed_secret_list(ctx, slug):
    """List the ids and creation times of SLUG's secrets (never the secrets)."""
    from tracker_core import operations

    click.echo(json.dumps(operations.list_backfeed_secrets(_admin(ctx), slug)))


@backfeed_secret.command("revoke")
@click.argument("slug")
@click.argument("secret_id")
@click.pass_context
def backfeed_secret_revoke(ctx, slug, secret_id):
    """Revoke SLUG's secret with id SECRET_ID (the 12 characters `list` shows, or a prefix of 6
    or more that only one secret has)."""
    from tracker_core import operations

    admin = _admin(ctx)
    revoked = operations.revoke_backfeed_secret(admin, slug, secret_id)["revoked"]
    _audit(admin, "backfeed_secret.revoke", slug, id=revoked)
    click.echo(f"revoked {revoked}")


@backfeed.command("shard-map")
@click.argument("slug")
@click.argument("shard", required=False)
@click.argument("queue", required=False)
@click.option("--remove", is_flag=True, help="Send SHARD's items to todo:backfeed again.")
@click.pass_context
def backfeed_shard_map(ctx, slug, shard, queue, remove):
    """Map backfeed SHARD of SLUG to QUEUE; with no SHARD, show the map and per-shard counts."""
    from tracker_core import operations

    admin = _admin(ctx)
    if shard is None:
        shown, items, cursor = None, {}, 0
        while True:  # the counts a page at a time, printed at once
            page = operations.shard_map(admin, slug, cursor, operations.MAX_PAGE)
            shown, cursor = page["map"], page["cursor"]
            items.update(page["items"])
            if cursor == 0:
                break
        click.echo(json.dumps({"map": shown, "items": items}))
        return
    if remove:
        result = operations.unmap_shard(admin, slug, shard)
        _audit(admin, "backfeed_shard.unmap", slug, shard=shard)
    elif queue is None:
        raise AdminError("give QUEUE, or --remove")
    else:
        result = operations.map_shard(admin, slug, shard, queue)
        _audit(admin, "backfeed_shard.map", slug, **result)
    click.echo(f"{result['shard']} -> {result['queue']}")


@backfeed.command("filter")
@click.argument("slug")
@click.option(
    "--capacity",
    type=click.IntRange(1),
    default=None,
    help="Items the first layer holds at the target rate (set while empty).",
)
@click.option(
    "--fp-rate",
    type=click.FloatRange(1e-15, 0.5),
    default=None,
    help="False-positive rate for absent items (set while empty).",
)
@click.pass_context
def backfeed_filter(ctx, slug, capacity, fp_rate):
    """Show SLUG's Bloom filter (layers, items, memory); set its geometry while it is empty."""
    from tracker_core import bloom

    admin = _admin(ctx)
    keys = _project_keys(admin, slug)
    wanted = None
    if capacity is not None or fp_rate is not None:
        wanted = bloom.Geometry(
            capacity=capacity or bloom.DEFAULT_CAPACITY, fp_rate=fp_rate or bloom.DEFAULT_FP_RATE
        )
    geometry = bloom.configure(admin.r, keys, wanted, replace=wanted is not None)
    if geometry == -2:
        _fail(ValueError(f"{slug}'s filter already holds items; its geometry can't change"))
    counts = admin.r.hgetall(keys.bloom)
    click.echo(
        json.dumps(
            {
                "capacity": geometry.capacity,
                "fp_rate": geometry.fp_rate,
                "layers": [
                    {
                        "capacity": layer.capacity,
                        "fp_rate": layer.fp_rate,
                        "k": layer.k,
                        "chunks": layer.chunks,
                        "bytes": layer.bits // 8,
                        "items": int(counts.get(f"n:{layer.index}", 0)),
                    }
                    for layer in geometry.all_layers()
                ],
                "items": int(counts.get("items", 0)),
                "bits_per_item_at_capacity": geometry.layer(0).bits / geometry.capacity,
            }
        )
    )


@main.group()
def limit():
    """Pattern and item-type limits: items that match share one rate."""


@limit.command("add")
@click.argument("slug")
@click.argument("name")
@click.argument("pattern")
@click.argument("rate")
@click.option(
    "--no-reclassify",
    is_flag=True,
    help="Leave queued items where they are (maintain holds them on its next pass).",
)
@click.pass_context
def limit_add(ctx, slug, name, pattern, rate, no_reclassify):
    """Add or replace limit NAME: PATTERN is type:T, prefix:P, domain:D or regex:R; RATE N/s or N/m."""
    from tracker_core import operations

    admin = _admin(ctx)
    age = operations.add_limit(admin, slug, name, pattern, rate, reclassify=not no_reclassify)["settings_age"]
    _audit(admin, "limit.add", slug, name=name, pattern=pattern, rate=rate, reclassify=not no_reclassify)
    click.echo(f"limit {name} of {slug} set; settings now at age {age}")


@limit.command("reclassify")
@click.argument("slug")
@click.pass_context
def limit_reclassify(ctx, slug):
    """Move queued items that a limit matches (added before it, or released) to its sub-queue."""
    from tracker_core import operations

    admin = _admin(ctx)
    moved = operations.reclassify(admin, slug)["held"]
    _audit(admin, "limit.reclassify", slug, held=moved)
    click.echo(f"held {moved} queued items of {slug}")


@limit.command("remove")
@click.argument("slug")
@click.argument("name")
@click.pass_context
def limit_remove(ctx, slug, name):
    """Remove limit NAME."""
    from tracker_core import operations

    admin = _admin(ctx)
    age = operations.remove_limit(admin, slug, name)["settings_age"]
    _audit(admin, "limit.remove", slug, name=name)
    click.echo(f"limit {name} of {slug} removed; settings now at age {age}")


@limit.command("list")
@click.argument("slug")
@click.pass_context
def limit_list(ctx, slug):
    """List SLUG's limits as JSON, in classification order (the first match wins)."""
    click.echo(json.dumps(_admin(ctx).limits(slug), indent=2))


@main.group()
def dead():
    """Items reclaimed more than max_reclaims times: list them, put them back."""


@dead.command("list")
@click.argument("slug")
@click.option("--count", default=1000, show_default=True, type=click.IntRange(1, 1000000))
@click.pass_context
def dead_list(ctx, slug, count):
    """Print up to COUNT of SLUG's dead items, one JSON object (item and history) a line."""
    from tracker_core import operations

    admin = _admin(ctx)
    printed, cursor = 0, 0
    while printed < count:  # HSCAN pages: never the whole hash at once
        page = operations.list_dead(admin, slug, cursor, min(1000, count - printed))
        for entry in page["dead"][: count - printed]:
            click.echo(json.dumps(entry, sort_keys=True))
            printed += 1
        cursor = page["cursor"]
        if cursor == 0:
            break


@dead.command("requeue")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Requeue every dead item.")
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@click.pass_context
def dead_requeue(ctx, slug, names, everything, queue):
    """Put dead items NAMES (or --all) back into a queue with a fresh claim count."""
    from tracker_core import operations

    admin = _admin(ctx)
    if everything == bool(names):
        raise click.UsageError("name the items to requeue, or pass --all")
    moved, cursor = 0, 0
    try:
        if everything:
            while True:  # a page at a time, like the API
                page = operations.requeue_dead_page(admin, slug, cursor, 1000, queue)
                moved, cursor = moved + page["requeued"], page["cursor"]
                if cursor == 0:
                    break
        else:
            step = operations.MAX_PAGE
            for start in range(0, len(names), step):
                moved += operations.requeue_dead(admin, slug, list(names[start : start + step]), queue)[
                    "requeued"
                ]
    except AdminError as exc:
        if moved:
            _audit(admin, "dead.requeue", slug, queue=queue, requeued=moved, stopped=str(exc))
        _fail(exc)
    _audit(
        admin,
        "dead.requeue",
        slug,
        queue=queue,
        requeued=moved,
        **({"all": True} if everything else {"items": len(names)}),
    )
    click.echo(f"requeued {moved} dead items of {slug}")


def _segments_dir(ctx, segments_dir):
    return Path(segments_dir) if segments_dir else Path(ctx.obj["data_dir"]) / "segments"


SEGMENTS_DIR_HELP = "Where segment files live (shared by every node that runs maintain)."


@main.command()
@click.option(
    "--segments-dir",
    envvar="TRACKER_SEGMENTS_DIR",
    default=None,
    help=SEGMENTS_DIR_HELP + " Default: DATA_DIR/segments.",
)
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.05, 3600),
    help="Seconds between passes.",
)
@click.option("--once", is_flag=True, help="Make one pass and exit.")
@click.option(
    "--supervise",
    is_flag=True,
    help="Run the maintainer in a child process and restart it whenever it dies (what `tracker run` does).",
)
@click.pass_context
def maintain(ctx, segments_dir, interval, once, supervise):
    """Offload each queue (and done, with done_mode=offload) beyond the project's high watermark
    to disk, refill below the low one, hold queued items that a changed limit now matches, and
    keep the statistics rolled up. Safe on several nodes at once (a lease per project)."""
    import signal
    import threading

    from tracker_core import offload

    if supervise:
        args = ["--interval", str(interval)]
        if segments_dir:
            args += ["--segments-dir", segments_dir]
        _supervise_maintain(ctx.obj["redis_url"], ctx.obj["data_dir"], args)
        return
    admin = _admin(ctx)
    # Blocks stored before the block index existed are enforced only once indexed.
    reindexed = admin.reindex_blocks_if_missing()
    if reindexed:
        _audit(admin, "block.reindex", None, projects=reindexed)
        click.echo(f"tracker: indexed the blocks of {reindexed} project(s)", err=True)
    maintainer = offload.Maintainer(
        admin.r, _segments_dir(ctx, segments_dir), log=lambda line: click.echo(line, err=True)
    )
    if once:
        try:
            click.echo(json.dumps(maintainer.pass_once()))
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


MAINTAIN_RESTART_MAX_S = 60.0


def _supervise_maintain(redis_url: str, data_dir: str, args: list[str]) -> None:
    """Run `tracker maintain ARGS` as a child; restart it after a back-off whenever it exits.

    `tracker run` starts this rather than the maintainer itself: its server loop reaps every
    child process (os.waitpid(-1)), so it cannot tell when a maintainer of its own died.
    """
    import signal
    import time

    stopping = False
    child = None

    def on_signal(*_):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    backoff = 1.0
    while not stopping:
        started = time.monotonic()
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracker_api.cli",
                "--redis-url",
                redis_url,
                "--data-dir",
                data_dir,
                "maintain",
                *args,
            ],
            stdin=subprocess.DEVNULL,
        )
        code = child.wait()
        if stopping:
            break
        backoff = (
            1.0
            if time.monotonic() - started > MAINTAIN_RESTART_MAX_S
            else min(backoff * 2, MAINTAIN_RESTART_MAX_S)
        )
        click.echo(f"tracker: maintain exited ({code}); restarting in {backoff:.0f}s", err=True)
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
    if child is not None:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@main.group()
def segments():
    """Offloaded segments of a project: list, export (take out), import (bring in)."""


@segments.command("list")
@click.argument("slug")
@click.pass_context
def segments_list(ctx, slug):
    """Print SLUG's segments as JSON: number -> items."""
    from tracker_core import offload

    admin = _admin(ctx)
    click.echo(json.dumps(offload.registry(admin.r, _project_keys(admin, slug)), sort_keys=True))


@segments.command("export")
@click.argument("slug")
@click.argument("number", type=click.IntRange(1))
@click.argument("destination", type=click.Path(dir_okay=False))
@click.option("--segments-dir", envvar="TRACKER_SEGMENTS_DIR", default=None, help=SEGMENTS_DIR_HELP)
@click.pass_context
def segments_export(ctx, slug, number, destination, segments_dir):
    """Move segment NUMBER out of SLUG into DESTINATION (its items leave the project, counted)."""
    from tracker_core import offload

    admin = _admin(ctx)
    try:
        n = offload.export_segment(
            admin.r, _project_keys(admin, slug), _segments_dir(ctx, segments_dir), number, Path(destination)
        )
    except (AdminError, offload.OffloadError) as exc:
        _fail(exc)
    _audit(admin, "segments.export", slug, segment=number, items=n, destination=str(destination))
    click.echo(f"exported segment {number} of {slug}: {n} items")


@segments.command("import")
@click.argument("slug")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.option("--segments-dir", envvar="TRACKER_SEGMENTS_DIR", default=None, help=SEGMENTS_DIR_HELP)
@click.option(
    "--queue",
    default="todo",
    show_default=True,
    help="Queue for the items of a file not exported from SLUG: todo, backfeed, secondary or redo.",
)
@click.pass_context
def segments_import(ctx, slug, source, segments_dir, queue):
    """Bring a segment file into SLUG. One exported from SLUG comes back once, as a segment of the
    queue it left (maintain refills it like any other); any other file, or the same one again, has
    its items added through SLUG's Bloom filter (items SLUG has seen are dropped as duplicates)."""
    from tracker_core import offload

    admin = _admin(ctx)
    try:
        result = offload.import_segment(
            admin.r, _project_keys(admin, slug), _segments_dir(ctx, segments_dir), Path(source), queue
        )
    except (AdminError, offload.OffloadError) as exc:
        _fail(exc)
    _audit(admin, "segments.import", slug, source=str(source), queue=queue, **result)
    if result["segment"] is not None:
        click.echo(f"imported {result['items']} items into {slug} as segment {result['segment']}")
    else:
        click.echo(
            f"imported {result['items']} items into {slug}:{queue} through the Bloom "
            f"filter ({result['duplicates']} duplicates dropped)"
        )


@main.group("log")
def log_group():
    """The done log (every completion, archived to segment files by maintain) and the uploads
    and bad_dones logs: export them as JSON lines."""


@log_group.command("export")
@click.argument("slug")
@click.option(
    "--kind",
    type=click.Choice(["done", "uploads", "bad_dones"]),
    default="done",
    show_default=True,
    help="Which log.",
)
@click.option(
    "--since", default=None, help="Entries from this time on: Unix seconds or ISO 8601 (UTC unless given)."
)
@click.option("--downloader", default=None, help="Only this downloader's (uploader's) entries.")
@click.option("--segments-dir", envvar="TRACKER_SEGMENTS_DIR", default=None, help=SEGMENTS_DIR_HELP)
@click.pass_context
def log_export(ctx, slug, kind, since, downloader, segments_dir):
    """Write SLUG's log to stdout as JSON lines, oldest first: the segment files, then Redis.
    Each done entry: entry (stream id), at (ms), downloader, ip, items, bytes, domains, version,
    id."""
    from tracker_core import log_archive

    admin = _admin(ctx)
    k = _project_keys(admin, slug)
    try:
        since_ms = None if since is None else log_archive.parse_since(since)
        out = sys.stdout.buffer
        log_archive.export(admin.r, k, _segments_dir(ctx, segments_dir), out, kind, since_ms, downloader)
        out.flush()
    except (log_archive.LogError, log_archive.LogUnreadable) as exc:
        raise click.ClickException(str(exc)) from None
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        sys.stderr.close()


@log_group.command("status")
@click.argument("slug")
@click.pass_context
def log_status(ctx, slug):
    """Print what SLUG's done log holds as JSON: segments, entries on disk and in Redis, the
    last archived entry, and entries the stream's safety bound dropped."""
    from tracker_core import log_archive

    admin = _admin(ctx)
    click.echo(json.dumps(log_archive.status(admin.r, _project_keys(admin, slug)), sort_keys=True))


if __name__ == "__main__":  # `python -m tracker_api.cli`, how `tracker run` starts the feed
    main()
