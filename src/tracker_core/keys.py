"""Build every Redis key name the tracker uses; nothing else concatenates key names.

A project's keys share the hash tag ``{PROJECT}`` so they live in one Redis Cluster slot and the
project's scripts stay atomic when projects are spread over a cluster. The names after the tag are
the ones the original tracker used (``todo``, ``out``, ``claims``, ``done``...), so an operator who
knows it finds their way.
"""
from __future__ import annotations

import re

# Global keys, outside any project's slot: only admin paths touch them, never a project's script.
PROJECTS = "tracker:projects"
GLOBAL_BLOCKED = "tracker:blocked"
GLOBAL_STATS = "tracker:stats"
SETTINGS_CHANNEL = "tracker:settings"

# The queues a claim visits after the downloader's own queue, in serve order.
SHARED_QUEUES = ("todo", "backfeed", "secondary", "redo")

PROJECT_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
RESERVED_PROJECT_NAMES = frozenset({"api", "admin", "backfeed", "metrics", "static", "projects.json"})


def valid_project_name(name: str) -> bool:
    return bool(PROJECT_NAME_RE.match(name)) and name not in RESERVED_PROJECT_NAMES


class ProjectKeys:
    """Key names of one project; built once per project and cached by the engine."""

    __slots__ = (
        "project", "tag", "settings", "blocked", "todo", "backfeed", "secondary", "redo",
        "downloader_queues", "out", "claims", "done", "downloader_claims", "ratelimit", "stats",
        "log", "bad_dones", "uploads", "upload_targets", "downloader_count", "downloader_bytes",
        "downloader_version", "domain_bytes",
    )

    def __init__(self, project: str):
        self.project = project
        tag = self.tag = "{%s}" % project
        self.settings = f"{tag}:settings"
        self.blocked = f"{tag}:blocked"
        self.todo = f"{tag}:todo"
        self.backfeed = f"{tag}:todo:backfeed"
        self.secondary = f"{tag}:todo:secondary"
        self.redo = f"{tag}:todo:redo"
        # Names of the downloaders that have a queue of their own, so status never needs KEYS.
        self.downloader_queues = f"{tag}:todo:d"
        self.out = f"{tag}:out"
        self.claims = f"{tag}:claims"
        self.done = f"{tag}:done"
        self.downloader_claims = f"{tag}:downloader_claims"
        self.ratelimit = f"{tag}:ratelimit"
        self.stats = f"{tag}:stats"
        self.log = f"{tag}:log"
        self.bad_dones = f"{tag}:bad_dones"
        self.uploads = f"{tag}:uploads"
        self.upload_targets = f"{tag}:upload_targets"
        self.downloader_count = f"{tag}:downloader_count"
        self.downloader_bytes = f"{tag}:downloader_bytes"
        self.downloader_version = f"{tag}:downloader_version"
        self.domain_bytes = f"{tag}:domain_bytes"

    def downloader_queue(self, downloader: str) -> str:
        return f"{self.tag}:todo:d:{downloader}"

    def minute(self, minute: int) -> str:
        """Per-minute counters (requests, items, bytes), kept two days for the charts."""
        return f"{self.tag}:minute:{minute}"

    def queue(self, name: str) -> str:
        """Key of a queue named as the CLI and admin API name them."""
        if name == "todo":
            return self.todo
        if name in ("backfeed", "secondary", "redo"):
            return getattr(self, name)
        if name.startswith("downloader:"):
            return self.downloader_queue(name[len("downloader:"):])
        raise ValueError(f"unknown queue {name!r}")

    def shared_queues(self) -> tuple[str, ...]:
        return (self.todo, self.backfeed, self.secondary, self.redo)
