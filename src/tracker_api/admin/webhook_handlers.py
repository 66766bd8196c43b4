"""The admin API's webhook handlers (tracker_core.admin.webhook_verbs): a global token manages
every hook under /api/admin/webhooks, a project's token that project's hooks under
/api/admin/projects/P/webhooks (and sees no other)."""

from __future__ import annotations

from tracker_api.admin import api_shapes
from tracker_api.admin.api_request import Call
from tracker_api.web.api_spec import declare
from tracker_core.admin import webhook_verbs


@declare("Every webhook, with delivery figures and the outbox's", answers=api_shapes.WEBHOOKS)
def list_global(c: Call):
    return webhook_verbs.list_hooks(c.ctx)


@declare(
    "Add a webhook (its secret shown once)",
    body=api_shapes.GLOBAL_WEBHOOK_BODY,
    answers=api_shapes.WEBHOOK,
    refuses=(404,),  # the project named is unknown
)
def add_global(c: Call):
    body = c.body()
    return webhook_verbs.add(c.ctx, body.get("url"), body.get("project"), body.get("events"))


@declare("Remove a webhook", answers=api_shapes.REMOVED)
def remove_global(c: Call):
    c.body(())
    return webhook_verbs.remove(c.ctx, c.params["hook_id"])


@declare("The project's webhooks, with delivery figures", answers=api_shapes.WEBHOOKS)
def list_project(c: Call):
    return webhook_verbs.list_hooks(c.ctx, c.project_name)


@declare(
    "Add a webhook for the project (its secret shown once)",
    body=api_shapes.PROJECT_WEBHOOK_BODY,
    answers=api_shapes.WEBHOOK,
)
def add_project(c: Call):
    body = c.body()
    return webhook_verbs.add(c.ctx, body.get("url"), c.project_name, body.get("events"))


@declare("Remove one of the project's webhooks", answers=api_shapes.REMOVED)
def remove_project(c: Call):
    c.body(())
    return webhook_verbs.remove(c.ctx, c.params["hook_id"], c.project_name)
