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
@click.option("--live-port", default=None, type=click.IntRange(0, 65535),
              help="Port of the live leaderboard feed (default: --port + 1; 0: no feed).")
@click.pass_context
def run(ctx, host, port, workers, trust_forwarded, demo, live_port):
    """Run the tracker: the embedded Redis (unless --redis-url), API workers, live feed, maintain."""
    from tracker_api.server import serve

    embedded = live = maintainer = None
    if not ctx.obj["explicit_redis"]:
        embedded = EmbeddedRedis(Path(ctx.obj["data_dir"]) / "redis").start()
        click.echo(f"tracker: embedded Redis at {embedded.url}", err=True)
    try:
        if demo:
            load_demo(_admin(ctx))
            click.echo(f"tracker: demo project at http://{host}:{port}/{DEMO_PROJECT}/", err=True)
        maintainer = _start_maintain_process(ctx.obj["redis_url"], ctx.obj["data_dir"])
        live_port = port + 1 if live_port is None else live_port
        if live_port:
            live = _start_live_process(ctx.obj["redis_url"], host, live_port)
            if live_port != port + 1:   # the page looks one port up unless told (":PORT")
                os.environ["TRACKER_LIVE_URL"] = f":{live_port}"
        serve(ctx.obj["redis_url"], host, port, workers, trust_forwarded)
    finally:
        if maintainer is not None:   # crash-safe by design: a plain terminate is enough
            maintainer.terminate()
            maintainer.wait(timeout=10)
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
    """Start `tracker maintain` (offloading, with a lease, so every node may run one)."""
    return subprocess.Popen([sys.executable, "-m", "tracker_api.cli", "--redis-url", redis_url,
                             "--data-dir", data_dir, "maintain"], stdin=subprocess.DEVNULL)


def _start_live_process(redis_url: str, host: str, port: int):
    """Start `tracker live` beside the API workers (its own process: asyncio, not bjoern)."""
    return subprocess.Popen([sys.executable, "-m", "tracker_api.cli", "--redis-url", redis_url,
                             "live", "--host", host, "--port", str(port)], stdin=subprocess.DEVNULL)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8081, show_default=True, type=click.IntRange(0, 65535))
@click.option("--interval", default=0.5, show_default=True, type=click.FloatRange(0.05, 60),
              help="Seconds between updates of one project (updates are coalesced).")
@click.pass_context
def live(ctx, host, port, interval):
    """Run the live leaderboard feed (websockets at ws://HOST:PORT/PROJECT)."""
    from tracker_api import live as live_mod
    live_mod.run(ctx.obj["redis_url"], host, port, interval)


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


# -- the admin API's operations, over the same code (tracker_core.operations) ------------------

def _operation(ctx, action: str, project: str | None, fn, *args, **kwargs):
    """Run an operation, audit it as done from the CLI, print its result as JSON."""
    from tracker_core import audit
    admin = _admin(ctx)
    try:
        result = fn(admin, *args, **kwargs)
    except (AdminError, ValueError) as exc:
        _fail(exc)
    if action:
        audit.record(admin.r, "cli", action, project,
                     **(result if isinstance(result, dict) else {"result": result}))
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
    _operation(ctx, "project.delete", slug, lambda a, p: operations.delete_project(a, p) or
               {"deleted": p}, slug)


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
    _operation(ctx, "queue.clear", slug, lambda a, p, q: {"dropped": operations.clear(a, p, q)},
               slug, name)


@queue.command("move")
@click.argument("slug")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.option("--pattern", default="*", show_default=True, help="Redis glob on item names.")
@click.pass_context
def queue_move(ctx, slug, source, target, pattern):
    """Move matching items FROM one queue TO another, page by page until done."""
    from tracker_core import audit, operations
    admin = _admin(ctx)
    moved, cursor = 0, 0
    try:
        while True:
            page = operations.move(admin, slug, source, target, pattern, cursor, limit=5000)
            moved, cursor = moved + page["moved"], page["cursor"]
            if cursor == 0:
                break
    except AdminError as exc:
        _fail(exc)
    audit.record(admin.r, "cli", "queue.move", slug, source=source, target=target,
                 pattern=pattern, moved=moved)
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
    from tracker_core import audit, operations
    admin = _admin(ctx)
    released, cursor = 0, 0
    try:
        while True:
            page = operations.release(admin, slug, downloader, older_than_s, pattern, cursor,
                                      limit=5000)
            released, cursor = released + page["released"], page["cursor"]
            if cursor == 0 or (older_than_s is not None and page["released"] == 0):
                break
    except AdminError as exc:
        _fail(exc)
    audit.record(admin.r, "cli", "claims.release", slug, downloader=downloader,
                 older_than_s=older_than_s, pattern=pattern, released=released)
    click.echo(json.dumps({"released": released}))


@main.group("admin")
def admin_group():
    """Admin API access: tokens."""


@admin_group.group("token")
def admin_token():
    """Create and revoke admin tokens (stored hashed; shown once)."""


@admin_token.command("create")
@click.option("--scope", default="*", show_default=True,
              help="'*' for a global admin, or a project name for that project's admin.")
@click.option("--note", default="", help="Who or what the token is for.")
@click.pass_context
def admin_token_create(ctx, scope, note):
    """Create a token and print it once, as JSON."""
    from tracker_core import audit, tokens
    admin = _admin(ctx)
    try:
        text, record = tokens.create(admin.r, scope, note)
    except tokens.TokenError as exc:
        _fail(exc)
    audit.record(admin.r, "cli", "token.create", None if record.is_global else scope,
                 token_id=record.token_id, scope=scope)
    click.echo(json.dumps({"token": text, "token_id": record.token_id, "scope": scope}))


@admin_token.command("revoke")
@click.argument("token_id")
@click.pass_context
def admin_token_revoke(ctx, token_id):
    """Revoke the token with id TOKEN_ID (the part after trk_)."""
    from tracker_core import audit, tokens
    admin = _admin(ctx)
    if not tokens.revoke(admin.r, token_id):
        _fail(ValueError(f"no token {token_id!r}"))
    audit.record(admin.r, "cli", "token.revoke", token_id=token_id)
    click.echo(f"revoked {token_id}")


@main.group()
def backfeed():
    """Backfeed: per-project secrets and the Bloom filter that dedups every item."""


@backfeed.group("secret")
def backfeed_secret():
    """Create, list and revoke the secrets grab scripts post backfeed with."""


def _project_keys(admin: Admin, slug: str):
    try:
        return admin._keys(slug)
    except AdminError as exc:
        _fail(exc)


@backfeed_secret.command("create")
@click.argument("slug")
@click.pass_context
def backfeed_secret_create(ctx, slug):
    """Create a secret for SLUG; it is printed once (only its hash is stored)."""
    from tracker_core import backfeed_secrets
    admin = _admin(ctx)
    secret_id, secret = backfeed_secrets.create(admin.r, _project_keys(admin, slug))
    click.echo(json.dumps({"id": secret_id, "secret": secret,
                           "path": f"/backfeed/legacy/{slug}-{secret}"}))


@backfeed_secret.command("list")
@click.argument("slug")
@click.pass_context
def backfeed_secret_list(ctx, slug):
    """List the ids and creation times of SLUG's secrets (never the secrets)."""
    from tracker_core import backfeed_secrets
    admin = _admin(ctx)
    click.echo(json.dumps(backfeed_secrets.list_secrets(admin.r, _project_keys(admin, slug))))


@backfeed_secret.command("revoke")
@click.argument("slug")
@click.argument("secret_id")
@click.pass_context
def backfeed_secret_revoke(ctx, slug, secret_id):
    """Revoke SLUG's secret with id SECRET_ID."""
    from tracker_core import backfeed_secrets
    admin = _admin(ctx)
    if not backfeed_secrets.revoke(admin.r, _project_keys(admin, slug), secret_id):
        _fail(ValueError(f"no secret {secret_id!r} in {slug}"))
    click.echo(f"revoked {secret_id}")


@backfeed.command("shard-map")
@click.argument("slug")
@click.argument("shard", required=False)
@click.argument("queue", required=False)
@click.option("--remove", is_flag=True, help="Send SHARD's items to todo:backfeed again.")
@click.pass_context
def backfeed_shard_map(ctx, slug, shard, queue, remove):
    """Map backfeed SHARD of SLUG to QUEUE; with no SHARD, show the map and per-shard counts."""
    from tracker_api.backfeed import SHARD_RE
    admin = _admin(ctx)
    keys = _project_keys(admin, slug)
    if shard is None:
        click.echo(json.dumps({"map": admin.r.hgetall(keys.backfeed_shard_map),
                               "items": {s: int(n) for s, n in
                                         admin.r.hgetall(keys.backfeed_shards).items()}}))
        return
    if not SHARD_RE.match(shard):
        _fail(ValueError(f"bad shard name {shard!r}"))
    if remove:
        admin.r.hdel(keys.backfeed_shard_map, shard)
        click.echo(f"{shard} -> backfeed")
        return
    if queue is None:
        _fail(ValueError("give QUEUE, or --remove"))
    try:
        keys.queue(queue)
    except ValueError as exc:
        _fail(exc)
    admin.r.hset(keys.backfeed_shard_map, shard, queue)
    click.echo(f"{shard} -> {queue}")


@backfeed.command("filter")
@click.argument("slug")
@click.option("--capacity", type=click.IntRange(1), default=None,
              help="Items the first layer holds at the target rate (set while empty).")
@click.option("--fp-rate", type=click.FloatRange(1e-15, 0.5), default=None,
              help="False-positive rate for absent items (set while empty).")
@click.pass_context
def backfeed_filter(ctx, slug, capacity, fp_rate):
    """Show SLUG's Bloom filter (layers, items, memory); set its geometry while it is empty."""
    from tracker_core import bloom
    admin = _admin(ctx)
    keys = _project_keys(admin, slug)
    wanted = None
    if capacity is not None or fp_rate is not None:
        wanted = bloom.Geometry(capacity=capacity or bloom.DEFAULT_CAPACITY,
                                fp_rate=fp_rate or bloom.DEFAULT_FP_RATE)
    geometry = bloom.configure(admin.r, keys, wanted, replace=wanted is not None)
    if geometry == -2:
        _fail(ValueError(f"{slug}'s filter already holds items; its geometry can't change"))
    counts = admin.r.hgetall(keys.bloom)
    click.echo(json.dumps({
        "capacity": geometry.capacity, "fp_rate": geometry.fp_rate, "layers": [
            {"capacity": layer.capacity, "fp_rate": layer.fp_rate, "k": layer.k,
             "chunks": layer.chunks, "bytes": layer.bits // 8,
             "items": int(counts.get(f"n:{layer.index}", 0))}
            for layer in geometry.all_layers()],
        "items": int(counts.get("items", 0)),
        "bits_per_item_at_capacity": geometry.layer(0).bits / geometry.capacity}))



@main.group()
def limit():
    """Pattern and item-type limits: items that match share one rate."""


@limit.command("add")
@click.argument("slug")
@click.argument("name")
@click.argument("pattern")
@click.argument("rate")
@click.pass_context
def limit_add(ctx, slug, name, pattern, rate):
    """Add or replace limit NAME: PATTERN is type:T, prefix:P, domain:D or regex:R; RATE N/s or N/m."""
    try:
        age = _admin(ctx).add_limit(slug, name, pattern, rate)
    except AdminError as exc:
        _fail(exc)
    click.echo(f"limit {name} of {slug} set; settings now at age {age}")


@limit.command("reclassify")
@click.argument("slug")
@click.pass_context
def limit_reclassify(ctx, slug):
    """Move queued items that a limit matches (added before it, or released) to its sub-queue."""
    try:
        moved = _admin(ctx).reclassify(slug)
    except AdminError as exc:
        _fail(exc)
    click.echo(f"held {moved} queued items of {slug}")


@limit.command("remove")
@click.argument("slug")
@click.argument("name")
@click.pass_context
def limit_remove(ctx, slug, name):
    """Remove limit NAME."""
    try:
        age = _admin(ctx).remove_limit(slug, name)
    except AdminError as exc:
        _fail(exc)
    click.echo(f"limit {name} of {slug} removed; settings now at age {age}")


@limit.command("list")
@click.argument("slug")
@click.pass_context
def limit_list(ctx, slug):
    """List SLUG's limits as JSON, in classification order (the first match wins)."""
    try:
        click.echo(json.dumps(_admin(ctx).limits(slug), indent=2))
    except AdminError as exc:
        _fail(exc)


@main.group()
def dead():
    """Items reclaimed more than max_reclaims times: list them, put them back."""


@dead.command("list")
@click.argument("slug")
@click.option("--count", default=1000, show_default=True, type=click.IntRange(1, 1000000))
@click.pass_context
def dead_list(ctx, slug, count):
    """Print SLUG's dead items, one JSON object (item and history) a line."""
    try:
        for entry in _admin(ctx).dead_items(slug, count):
            click.echo(json.dumps(entry, sort_keys=True))
    except AdminError as exc:
        _fail(exc)


@dead.command("requeue")
@click.argument("slug")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Requeue every dead item.")
@click.option("--queue", default="todo", show_default=True, help=QUEUE_HELP)
@click.pass_context
def dead_requeue(ctx, slug, names, everything, queue):
    """Put dead items NAMES (or --all) back into a queue with a fresh claim count."""
    admin = _admin(ctx)
    try:
        if everything:
            names = [entry["item"] for entry in admin.dead_items(slug, 10 ** 9)]
        if not names:
            raise click.UsageError("name the items to requeue, or pass --all")
        moved = admin.requeue_dead(slug, list(names), queue)
    except AdminError as exc:
        _fail(exc)
    click.echo(f"requeued {moved} dead items of {slug}")


def _segments_dir(ctx, segments_dir):
    return Path(segments_dir) if segments_dir else Path(ctx.obj["data_dir"]) / "segments"


SEGMENTS_DIR_HELP = "Where segment files live (shared by every node that runs maintain)."


@main.command()
@click.option("--segments-dir", envvar="TRACKER_SEGMENTS_DIR", default=None,
              help=SEGMENTS_DIR_HELP + " Default: DATA_DIR/segments.")
@click.option("--interval", default=1.0, show_default=True, type=click.FloatRange(0.05, 3600),
              help="Seconds between passes.")
@click.option("--once", is_flag=True, help="Make one pass and exit.")
@click.pass_context
def maintain(ctx, segments_dir, interval, once):
    """Offload todo beyond each project's high watermark to disk, refill below the low one, and
    hold queued items that a changed limit now matches."""
    import socket
    import time
    import uuid
    from tracker_core import offload
    admin = _admin(ctx)
    directory = _segments_dir(ctx, segments_dir)
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    classified_ages: dict = {}
    while True:
        moved = offload.maintain_once(admin.r, holder, directory, classified_ages)
        if once:
            click.echo(json.dumps(moved if moved is not None else {"lease": "held elsewhere"}))
            return
        time.sleep(interval)


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
    try:
        click.echo(json.dumps(offload.registry(admin.r, _project_keys(admin, slug)), sort_keys=True))
    except AdminError as exc:
        _fail(exc)


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
        n = offload.export_segment(admin.r, _project_keys(admin, slug),
                                   _segments_dir(ctx, segments_dir), number, Path(destination))
    except (AdminError, offload.OffloadError) as exc:
        _fail(exc)
    click.echo(f"exported segment {number} of {slug}: {n} items")


@segments.command("import")
@click.argument("slug")
@click.argument("source", type=click.Path(dir_okay=False, exists=True))
@click.option("--segments-dir", envvar="TRACKER_SEGMENTS_DIR", default=None, help=SEGMENTS_DIR_HELP)
@click.pass_context
def segments_import(ctx, slug, source, segments_dir):
    """Bring an exported segment file into SLUG; maintain refills it like any other."""
    from tracker_core import offload
    admin = _admin(ctx)
    try:
        number, n = offload.import_segment(admin.r, _project_keys(admin, slug),
                                           _segments_dir(ctx, segments_dir), Path(source))
    except (AdminError, offload.OffloadError) as exc:
        _fail(exc)
    click.echo(f"imported {n} items into {slug} as segment {number}")

if __name__ == "__main__":   # `python -m tracker_api.cli`, how `tracker run` starts the feed
    main()
