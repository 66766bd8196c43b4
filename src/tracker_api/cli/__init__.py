"""The ``tracker`` command: one module per command group, the process commands apart.

root.py holds the group and the conventions every command shares, output.py the table or
--json printing, errors.py the one map from an error to an exit code and a line.

May import: every part of tracker_api (the command line is its top layer).
"""

from tracker_api.cli import (  # noqa: F401 - each module adds its commands to main
    backfeed,
    backups,
    claims,
    dead,
    hq,
    items,
    limits,
    log,
    process_commands,
    projects,
    queues,
    segments,
    tokens,
    webhooks,
)
from tracker_api.cli.root import main

__all__ = ["main"]
