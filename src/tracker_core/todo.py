"""Moved to tracker_core.census (the one count of where every item is); kept until its last
callers switch (tracker_api.stats, front_page, metrics, tracker_core.stats)."""

from tracker_core.census import (  # noqa: F401
    DONE_SOURCE,
    DOWNLOADER_QUEUES_COUNTED,
    N_COMMANDS,
    STAGED_FIELD,
    commands,
    offloaded_queued,
    owners,
    read,
    sizes,
    todo_total,
    total,
)
