"""Transition shim: the old ``Admin`` class over the verbs of this package.

``from tracker_core.admin import Admin, AdminError, NOT_UTF8, REDO_QUEUE, connect, valid_utf8``
keeps working, with the old methods and answers; nothing here audits (the faces that still
call it audit on their own). The lead deletes it once every face has switched to the verbs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import redis

from tracker_core import census, intake
from tracker_core import keys as keyspace
from tracker_core.admin import dead as dead_verbs
from tracker_core.admin import items, limits, projects
from tracker_core.admin.context import AdminContext, connect  # noqa: F401  (old import)
from tracker_core.admin.errors import AdminError, Conflict  # noqa: F401  (old import)
from tracker_core.admin.items import REDO_BATCH, REDO_FIELDS, REDO_QUEUE, REDO_SKIP_FIELDS  # noqa: F401

ADD_BATCH = intake.ADD_BATCH
NOT_UTF8 = intake.NOT_UTF8
valid_utf8 = intake.valid_utf8


class Admin:
    def __init__(self, client: redis.Redis):
        self.r = client
        self.ctx = AdminContext(client, None)  # not audited: see the module's docstring

    @classmethod
    def from_url(cls, url: str) -> Admin:
        return cls(connect(url))

    def _keys(self, project: str, must_exist: bool = True) -> keyspace.ProjectKeys:
        return self.ctx.keys(project, must_exist)

    def create_project(self, project: str, **values: str) -> bool:
        """Create PROJECT with default settings (overridden by VALUES); False if it exists."""
        try:
            projects.create(self.ctx, project, values)
        except Conflict:
            return False
        return True

    def projects(self) -> list[str]:
        return projects.list_projects(self.ctx)

    def set_settings(self, project: str, values: dict[str, str]) -> int:
        return projects.store_settings(self.ctx, self._keys(project), values)

    def show_project(self, project: str) -> dict:
        return projects.show(self.ctx, project)

    def set_upload_target(self, project: str, url: str, state: str) -> int:
        """Mark URL 'active' or 'inactive', or remove it (state ''); the new settings age."""
        projects.set_upload_target(self.ctx, project, url, state or "remove")
        return int(self.r.hget(self._keys(project).settings, "settings_age"))

    def block(self, entry: str, project: str | None = None, remove: bool = False) -> str:
        return limits.block(self.ctx, entry, project, remove)["entry"]

    def blocks(self, project: str | None = None) -> dict:
        return limits.blocks(self.ctx, project)

    def reindex_blocks(self) -> int:
        return limits.reindex_blocks(self.ctx)["projects"]

    def reindex_blocks_if_missing(self) -> int:
        return limits.reindex_blocks_if_missing(self.ctx)["projects"]

    def _write_blocks(self, k: keyspace.ProjectKeys, change) -> bool:
        return limits.write_blocks(self.ctx, k, change)

    def add_items(
        self,
        project: str,
        names: Iterable[str],
        queue: str = "todo",
        batch: int = ADD_BATCH,
        refused: dict | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Queue NAMES in batches (tracker_core.intake.add); yield (added, duplicates) per batch."""
        return intake.add(self.r, self._keys(project), names, queue, batch, refused)

    def status(self, project: str) -> dict:
        return census.project_status(census.redis_py_runner(self.r), self._keys(project))

    def add_limit(self, project: str, name: str, pattern: str, rate: str, reclassify: bool = True) -> int:
        return limits.add(self.ctx, project, name, pattern, rate, reclassify)["settings_age"]

    def reclassify(self, project: str) -> int:
        return limits.reclassify(self.ctx, project)["held"]

    def remove_limit(self, project: str, name: str) -> int:
        return limits.remove(self.ctx, project, name)["settings_age"]

    def limits(self, project: str) -> list[dict]:
        return limits.list_limits(self.ctx, project)

    def requeue_dead(self, project: str, names: list[str], queue: str = "todo") -> int:
        return dead_verbs.requeue_names(self.ctx, self._keys(project), names, queue)

    def seen_by_filter(self, k: keyspace.ProjectKeys, names: list[str]) -> list[bool]:
        return items.seen_by_filter(self.r, k, names)

    def redo_items(
        self, project: str, names: list[str], queue: str = REDO_QUEUE, even_if_offloaded: bool = False
    ) -> dict:
        return items.redo_names(self.ctx, project, names, queue, even_if_offloaded)
