"""`tracker backup DIR` and `tracker restore DIR`: backups while serving (tracker_core.backup)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click

from tracker_api.cli import errors, output
from tracker_api.cli.root import globals_, main, segments_dir_option, version
from tracker_api.web import redact

SOURCE = Path(__file__).resolve().parents[3]


def commit() -> str:
    """The source tree's commit when run from a git checkout, else "unknown"."""
    try:
        found = subprocess.run(
            ["git", "-C", str(SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return found.stdout.strip() if found.returncode == 0 else "unknown"


def census_lines(census: dict) -> list[str]:
    return [
        f"  {project}: todo {c['todo_total']}, out {c['out']}, offloaded {c['offloaded']}, "
        f"dead {c['dead']}, done {c['done']} ({c['done_kept']} kept, {c['done_offloaded']} offloaded)"
        for project, c in sorted(census.items())
    ]


def log(line: str) -> None:
    if not output.wants_json():
        click.echo(line, err=True)


@main.command("backup")
@click.argument("directory", type=click.Path(file_okay=False))
@segments_dir_option()
@click.option(
    "--lease-wait",
    type=click.FloatRange(0.1, 3600),
    default=40.0,
    metavar="SECONDS",
    help="How long to wait for a maintainer's running pass to give up a project's offload lease "
    "(a lease lasts 30 s; an older release's maintainer never gives it up early).",
)
def backup_command(directory, segments_dir, lease_wait):
    """Back up Redis and the segment files into DIRECTORY (new) while the tracker serves.

    Holds every project's offload lease (maintainers pause offloading and refills, warriors go
    on), copies each Redis primary's data as a replica would and the segment files, and writes
    a manifest with checksums and the census of every project. DIRECTORY appears whole or not
    at all (it is written as DIRECTORY.partial). docs/runbook.md, "Backups and restore"."""
    from tracker_core.backup import taking
    from tracker_core.backup.hold import BackupError

    g = globals_()
    try:
        result = taking.backup(
            g.redis_url,
            g.segments_dir(segments_dir),
            Path(directory),
            {"version": version(), "commit": commit()},
            log=log,
            wait_s=lease_wait,
        )
    except (BackupError, OSError) as exc:  # OSError: the directory cannot be written, a full disk
        raise errors.Failure(str(exc)) from None
    size = sum(f["bytes"] for f in result["files"].values())
    lines = [
        f"backed up {redact.redact(g.redis_url)} and {result['segments_dir']} into {directory}: "
        f"{len(result['files'])} files, {size} bytes, {result['took_s']}s",
        *census_lines(result["census"]),
    ]
    output.emit(result, "\n".join(lines))


@main.command("restore")
@click.argument("directory", type=click.Path(file_okay=False))
@segments_dir_option()
@click.option(
    "--force",
    is_flag=True,
    help="Restore even into a Redis that holds keys or has clients, or a segments directory "
    "with files (to finish a restore that was cut short): keys are replaced, others kept.",
)
def restore_command(directory, segments_dir, force):
    """Restore the backup in DIRECTORY into a stopped deployment: Redis (--redis-url, or the
    embedded one under --data-dir) and the segments directory.

    Checks the manifest and every checksum first, and refuses a Redis that holds keys or has
    clients; then prints the census beside the backup's and exits 1 if they differ."""
    from tracker_core.backup import restoring
    from tracker_core.backup.hold import BackupError

    g = globals_()
    embedded = None
    try:
        url = g.redis_url
        if not g.explicit_redis:
            embedded = restoring.embedded_target(Path(g.data_dir))
            url = embedded.url
        result = restoring.restore(Path(directory), url, g.segments_dir(segments_dir), force, log=log)
    except (BackupError, OSError) as exc:
        raise errors.Failure(str(exc)) from None
    finally:
        if embedded is not None:
            embedded.stop()
    lines = [
        f"restored {directory} (taken {result['taken_at']}): {result['keys']} keys, "
        f"{result['segment_files']} segment files",
        *census_lines(result["census"]),
    ]
    if result["differences"]:
        lines += ["the census differs from the backup's:", *(f"  {d}" for d in result["differences"])]
    else:
        lines.append("the census equals the backup's")
    output.emit(result, "\n".join(lines))
    if result["differences"]:
        raise SystemExit(errors.FAILURE)
