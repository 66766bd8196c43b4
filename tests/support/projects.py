"""A project made through the admin verbs, as the tests' fixtures set one up."""

from __future__ import annotations

from collections.abc import Iterable

from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext


def new_project(
    ctx: AdminContext, name: str, items: Iterable[str] | None = None, settings: dict | None = None
) -> str:
    """Create project NAME with SETTINGS, add ITEMS (if given) to its todo queue; return NAME."""
    project_verbs.create(ctx, name, settings)
    if items is not None:
        item_verbs.add(ctx, name, items)
    return name
