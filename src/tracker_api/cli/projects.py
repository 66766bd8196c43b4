"""`tracker project ...`, `tracker status` and `tracker upload-target`."""

from __future__ import annotations

import click

from tracker_api.cli import errors, output
from tracker_api.cli.root import admin, audit, key_values, main, operation


@main.group()
def project():
    """Create, change, pause and show projects."""


@project.command("create")
@click.argument("slug")
@click.option("--title", default="", help="The project's title on its pages.")
@output.json_option
def project_create(slug, title):
    """Create project SLUG with default settings."""
    a = admin()
    values = {"title": title} if title else {}
    if not a.create_project(slug, **values):
        raise errors.Failure(f"project {slug!r} already exists")
    audit(a, "project.create", slug, settings=values)
    output.emit({"project": slug, "created": True}, f"created project {slug}")


@project.command("set")
@click.argument("slug")
@click.argument("assignments", nargs=-1, required=True)
@output.json_option
def project_set(slug, assignments):
    """Change settings: tracker project set SLUG KEY=VALUE... (see `project settings`)."""
    values = key_values(assignments)
    a = admin()
    age = a.set_settings(slug, values)
    audit(a, "project.settings", slug, settings=values)
    output.emit({"project": slug, "settings_age": age}, f"settings of {slug} now at age {age}")


@project.command("show")
@click.argument("slug")
@output.json_option
def project_show(slug):
    """Show a project's settings, upload targets and blocks."""
    output.emit(admin().show_project(slug))


@project.command("list")
@output.json_option
def project_list():
    """List the projects, one a line."""
    output.emit(admin().projects())


@project.command("settings")
@output.json_option
def project_settings():
    """Describe every setting and its default."""
    from tracker_core import settings as settings_mod

    described = {name: {"default": d, "meaning": m} for name, (_, d, m) in settings_mod.SETTINGS.items()}
    output.emit(
        described,
        "\n".join(f"{name:28} default {d['default']!r:10} {d['meaning']}" for name, d in described.items()),
    )


@project.command("pause")
@click.argument("slug")
@output.json_option
def project_pause(slug):
    """Stop handing out items (requests get 404)."""
    from tracker_core import operations

    operation("project.pause", slug, operations.pause, slug, True)


@project.command("resume")
@click.argument("slug")
@output.json_option
def project_resume(slug):
    """Hand out items again."""
    from tracker_core import operations

    operation("project.resume", slug, operations.pause, slug, False)


@project.command("delete")
@click.argument("slug")
@click.option("--yes", is_flag=True, help="Really delete the project and all its items.")
@output.json_option
def project_delete(slug, yes):
    """Delete a project and its keys (UNLINK, no KEYS)."""
    from tracker_core import operations

    if not yes:
        raise click.UsageError("deleting drops every item of the project: add --yes")
    operation("project.delete", slug, lambda a, p: operations.delete_project(a, p) or {"deleted": p}, slug)


@main.command()
@click.argument("slug")
@output.json_option
def status(slug):
    """Print the size of every queue, out and done."""
    output.emit(admin().status(slug))


@main.command("upload-target")
@click.argument("slug")
@click.argument("url")
@click.option(
    "--state",
    type=click.Choice(["active", "inactive", "remove"]),
    default="active",
    show_default=True,
    help="Hand the target out (active), keep it but not hand it out (inactive), or remove it.",
)
@output.json_option
def upload_target(slug, url, state):
    """Add, deactivate or remove an upload target (':downloader' is replaced per warrior)."""
    a = admin()
    a.set_upload_target(slug, url, "" if state == "remove" else state)
    audit(a, "upload_target", slug, url=url, state="removed" if state == "remove" else state)
    output.emit({"project": slug, "url": url, "state": state}, f"{url}: {state}")
