"""Webhooks (tracker_core.notify.hooks): added with a secret shown once, listed with their
delivery figures (never the secret), removed. A hook with a project receives that project's
events; one without, every project's and the deployment's (redis.failover, clock.off)."""

from __future__ import annotations

from urllib.parse import urlsplit

from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.infra import redis_clock
from tracker_core.notify import hooks, outbox


def add(ctx: AdminContext, url, project: str | None = None, events=None) -> dict:
    """A hook for URL (project PROJECT's events, or every project's and the deployment's with
    none), for EVENTS (a list; None: every event it can get); its secret shown only here."""
    if project is not None:
        ctx.keys(project)
    try:
        checked_url = hooks.check_url(url)
        chosen = hooks.check_events(events, project)
        hook = hooks.add(ctx.conn, checked_url, project, chosen, redis_clock.now_ms(ctx.conn, checked=False))
    except hooks.HookError as exc:
        raise BadInput(str(exc)) from None
    ctx.audit("webhook.add", project, hook_id=hook.hook_id, host=_host(checked_url), events=list(chosen))
    return {**hook.public(), "secret": hook.secret}


def list_hooks(ctx: AdminContext, project: str | None = None) -> dict:
    """The hooks (of PROJECT only, when given) with their figures; with no PROJECT, the
    outbox's figures too."""
    if project is not None:
        ctx.keys(project)
    found = [h for h in hooks.every_hook(ctx.conn) if project is None or h.project == project]
    figures = hooks.figures(ctx.conn, found)
    answer: dict = {"webhooks": [{**h.public(), **figures[h.hook_id]} for h in found]}
    if project is None:
        answer["outbox"] = outbox.figures(ctx.conn)
    return answer


def remove(ctx: AdminContext, hook_id, project: str | None = None) -> dict:
    """Remove hook HOOK_ID (with PROJECT: only if it is that project's)."""
    if type(hook_id) is not str or not hooks.HOOK_ID_RE.match(hook_id):
        raise BadInput(f"bad webhook id {str(hook_id)[:40]!r}: 12 hex characters")
    if project is not None:
        ctx.keys(project)
        hook = hooks.get(ctx.conn, hook_id)
        if hook is None or hook.project != project:
            raise NotFound(f"no webhook {hook_id!r} for project {project!r}")
    if not hooks.remove(ctx.conn, hook_id):
        raise NotFound(f"no webhook {hook_id!r}")
    ctx.audit("webhook.remove", project, hook_id=hook_id)
    return {"removed": hook_id}


def _host(url: str) -> str:
    """What the audit log keeps of a URL: its host (a receiver's path may hold its own secret)."""
    return urlsplit(url).hostname or ""
