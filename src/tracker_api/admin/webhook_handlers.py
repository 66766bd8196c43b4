"""The admin API's webhook handlers (tracker_core.admin.webhook_verbs): a global token manages
every hook under /api/admin/webhooks, a project's token that project's hooks under
/api/admin/projects/P/webhooks (and sees no other)."""

from __future__ import annotations

from tracker_api.admin.api_request import Call
from tracker_core.admin import webhook_verbs

BODY = ("url", "events", "project")


def list_global(c: Call):
    return webhook_verbs.list_hooks(c.ctx)


def add_global(c: Call):
    body = c.body(BODY)
    return webhook_verbs.add(c.ctx, body.get("url"), body.get("project"), body.get("events"))


def remove_global(c: Call):
    c.body(())
    return webhook_verbs.remove(c.ctx, c.params["hook_id"])


def list_project(c: Call):
    return webhook_verbs.list_hooks(c.ctx, c.project_name)


def add_project(c: Call):
    body = c.body(BODY[:2])
    return webhook_verbs.add(c.ctx, body.get("url"), c.project_name, body.get("events"))


def remove_project(c: Call):
    c.body(())
    return webhook_verbs.remove(c.ctx, c.params["hook_id"], c.project_name)
