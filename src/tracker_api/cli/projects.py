"""`tracker project ...`, `tracker status` and `tracker upload-target`."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import context, key_values, main, show, slug_command
from tracker_core.admin import census_verbs, project_verbs
from tracker_core.project.shard_layout import MAX_SHARDS


@main.group()
def project():
    """Create, change, pause and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="", show_default=False, help="The project's title on its pages.")
@click.option(
    "--shards",
    type=click.IntRange(1, MAX_SHARDS),
    default=1,
    help="Spread the project over this many Redis primaries (docs/sharding.md).",
)
def project_create(slug, title, shards):
    """Create project SLUG with default settings."""
    result = project_verbs.create(context(), slug, {"title": title} if title else None, shards=shards)
    output.emit(result, f"created project {slug}" + (f" over {shards} shards" if shards > 1 else ""))


@project.command("grow")
@click.argument("slug")
@click.option(
    "--shards",
    type=click.IntRange(2, MAX_SHARDS),
    required=True,
    help="The shards the project has in all once grown (docs/sharding.md, Adding shards).",
)
def project_grow(slug, shards):
    """Add shards to project SLUG: its items stay where they are, new ones spread over all."""
    result = project_verbs.grow(context(), slug, shards)
    output.emit(result, f"project {slug} now has {shards} shards (had {result['before']})")


@project.command("set")
@click.argument("slug")
@click.argument("assignments", nargs=-1, required=True)
def project_set(slug, assignments):
    """Change settings: tracker project set SLUG KEY=VALUE... (see `project settings`)."""
    result = project_verbs.set_settings(context(), slug, key_values(assignments))
    output.emit(result, f"settings of {slug} now at age {result['settings_age']}")


slug_command(project, "show", project_verbs.show, "Show a project's settings, upload targets and blocks.")


@project.command("list")
def project_list():
    """List the projects, one a line."""
    show(project_verbs.list_projects)


@project.command("settings")
def project_settings():
    """Describe every setting and its default."""
    from tracker_core.project import settings_schema

    described = {name: {"default": d, "meaning": m} for name, (_, d, m) in settings_schema.SETTINGS.items()}
    output.emit(
        described,
        "\n".join(f"{name:28} default {d['default']!r:10} {d['meaning']}" for name, d in described.items()),
    )


slug_command(project, "pause", project_verbs.pause, "Stop handing out items (requests get 404).")


slug_command(project, "resume", project_verbs.resume, "Hand out items again.")


@project.command("delete")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="Really delete the project and all its items.")
def project_delete(slug, yes):
    """Delete a project and its keys (UNLINK, no KEYS)."""
    if not yes:
        raise click.UsageError("deleting drops every item of the project: add --yes")
    show(project_verbs.delete, slug)


slug_command(main, "status", census_verbs.status, "Print the size of every queue, out and done.")


@main.command("upload-target")
@click.argument("slug")
@click.argument("url")
@click.option(
    "--state",
    type=click.Choice(["active", "inactive", "remove"]),
    default="active",
    help="Hand the target out (active), keep it but not hand it out (inactive), or remove it.",
)
def upload_target(slug, url, state):
    """Add, deactivate or remove an upload target (':downloader' is replaced per warrior)."""
    result = project_verbs.set_upload_target(context(), slug, url, state)
    output.emit(result, f"{url}: {state}")
