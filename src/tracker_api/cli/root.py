"""The root ``tracker`` group and what every command shares: -h, --version, TRACKER_...
environment variables shown in help, global options taken anywhere, and the error map."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from tracker_api.cli import errors, output, redis_secret
from tracker_core.infra import redis_clock

if TYPE_CHECKING:  # imported when first used: `tracker -h` needs no Redis client
    from tracker_core.admin.context import AdminContext

DEFAULT_DATA_DIR = "var"
ENV_PREFIX = "TRACKER"  # --some-option of `tracker items add` reads TRACKER_ITEMS_ADD_SOME_OPTION
GLOBAL_OPTIONS = ("--redis-url", "--redis-password-file", "--data-dir", "--max-clock-offset")
QUEUE_HELP = "Queue: todo, secondary, backfeed, redo or downloader:NAME."


def version() -> str:
    try:
        return metadata.version("tracker")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _show_version(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"tracker {version()}")
        ctx.exit()


def _conventions(command: click.Command, prints: bool = False) -> None:
    """Give COMMAND --json when it PRINTS an answer and --version, and have its help show each
    option's environment variable."""
    if prints:
        command.params.append(output.json_param())
    for param in command.params:
        if isinstance(param, click.Option):
            param.show_envvar = True
    command.params.append(
        click.Option(
            ["--version"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            allow_from_autoenv=False,
            callback=_show_version,
            help="Show the version and exit.",
        )
    )


class Command(click.Command):
    """A command that prints its answer (--json: as JSON); PRINTS=False for one that runs a
    process instead."""

    def __init__(self, *args, prints: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        _conventions(self, prints)


class Group(click.Group):
    command_class = Command
    group_class = type  # subgroups are Groups too

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _conventions(self)


class Root(Group):
    """The command group: global options are also taken after the command (`tracker run
    --redis-url URL`, as operators write it): they are moved to the front before parsing;
    nothing after `--` moves. Whatever a command raises goes through the error map."""

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
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            failure = errors.as_failure(exc, ctx.obj.redis_url if ctx.obj else "")
            if failure is None:
                raise
            raise failure from None


@dataclass
class Globals:
    redis_url: str
    data_dir: str
    explicit_redis: bool  # False: the embedded Redis under DATA_DIR
    admin: AdminContext | None = None  # made on first use (see context())

    def segments_dir(self, given: str | None = None) -> Path:
        return Path(given) if given else Path(self.data_dir) / "segments"


def default_redis_url(data_dir: str) -> str:
    from tracker_core.infra.embedded import EmbeddedRedis

    return EmbeddedRedis(Path(data_dir) / "redis").url


def globals_() -> Globals:
    return click.get_current_context().find_root().obj


def context() -> AdminContext:
    """The admin context of this invocation: its Redis, acting as "cli" in the audit log (the
    verbs of tracker_core.admin audit their own changes)."""
    from tracker_core.admin.context import AdminContext

    g = globals_()
    if g.admin is None:
        g.admin = AdminContext.from_url(g.redis_url, actor="cli")
    return g.admin


def show(verb, *args, **kwargs):
    """Run an admin verb with this invocation's context and print its answer."""
    result = verb(context(), *args, **kwargs)
    output.emit(result)
    return result


def slug_command(group: click.Group, name: str, verb, help_text: str) -> click.Command:
    """Add command NAME to GROUP: it prints VERB's answer for the project its SLUG argument names."""

    @group.command(name, help=help_text)
    @click.argument("slug")
    def command(slug):
        show(verb, slug)

    return command


def segments_dir_option(default_note: str = "Default: DATA_DIR/segments."):
    """--segments-dir (TRACKER_SEGMENTS_DIR), as every command that reads or writes segments takes it."""
    return click.option(
        "--segments-dir",
        envvar="TRACKER_SEGMENTS_DIR",
        default=None,
        help=f"Where segment files live (shared by every node that runs maintain). {default_note}",
    )


def key_values(assignments) -> dict[str, str]:
    """KEY=VALUE arguments as a dict; anything else is a usage error."""
    values = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep:
            raise click.UsageError(f"expected KEY=VALUE, got {assignment!r}")
        values[name] = value
    return values


@click.group(
    "tracker",
    cls=Root,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "auto_envvar_prefix": ENV_PREFIX,
        "max_content_width": 100,
        "show_default": True,  # every option's help shows its default
    },
)
@click.option(
    "--redis-url",
    envvar="TRACKER_REDIS_URL",
    default=None,
    help="Redis to use: redis://HOST:PORT/DB, unix:///PATH, "
    "redis+sentinel://HOST:PORT,.../SERVICE or redis+cluster://HOST:PORT,... "
    "Default: the embedded one under --data-dir. A password on the command line is readable by "
    "every local user: give the URL in TRACKER_REDIS_URL, or the password in a file.",
)
@click.option(
    redis_secret.PASSWORD_FILE_OPTION,
    envvar=redis_secret.PASSWORD_FILE_VARIABLE,
    default=None,
    metavar="PATH",
    help="A file holding the Redis password (one line; mode 0600, or 0640 for the service's group), "
    "for a --redis-url without one.",
)
@click.option(
    "--data-dir",
    envvar="TRACKER_DATA_DIR",
    default=DEFAULT_DATA_DIR,
    help="Where the embedded Redis keeps its data (and segments, unless told otherwise).",
)
@click.option(
    "--max-clock-offset",
    envvar=redis_clock.MAX_OFFSET_ENV,
    default=redis_clock.DEFAULT_MAX_OFFSET_S,
    type=click.FloatRange(0, 86400 * 365),
    expose_value=False,
    is_eager=True,
    callback=lambda _ctx, _param, value: redis_clock.configure(value),
    help="Seconds this node's clock may be off Redis's before it refuses to serve (0: no "
    "bound). Times are Redis's either way (docs/operations.md, Clocks).",
)
@click.option(
    "--json",
    is_flag=True,
    expose_value=False,
    callback=output._remember_json,
    help="Every command prints JSON instead of a table.",
)
@click.pass_context
def main(ctx, redis_url, redis_password_file, data_dir):
    """A tracker for distributed archiving: hands items to warriors and takes them back."""
    if redis_url is not None and ctx.get_parameter_source("redis_url") is ParameterSource.COMMANDLINE:
        redis_secret.hide_from_command_line(redis_url)
    if redis_password_file is not None:
        if redis_url is None:
            raise click.UsageError(
                f"{redis_secret.PASSWORD_FILE_OPTION} needs --redis-url (or TRACKER_REDIS_URL): "
                "the embedded Redis takes no password"
            )
        redis_url = redis_secret.with_password(
            redis_url, redis_secret.read_password_file(redis_password_file)
        )
    ctx.obj = Globals(
        redis_url=redis_url or default_redis_url(data_dir),
        data_dir=data_dir,
        explicit_redis=redis_url is not None,
    )


@main.group("admin")
def admin_group():
    """Admin tokens, the audit log, the warrior registry and the HQ document (as the admin API)."""
