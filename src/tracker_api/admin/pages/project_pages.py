"""/admin/P[/NAME]: a project's pages, and the actions of their forms."""

from __future__ import annotations

import functools
import urllib.parse
from typing import Any

import falcon

from tracker_api.admin.api_request import DIGITS_RE
from tracker_api.admin.pages.base import LISTED, Pages
from tracker_api.admin.pages.filter_pages import FilterPages
from tracker_api.admin.pages.forms import FormError
from tracker_api.admin.pages.paging import continued, form_cursor, int_param, paged
from tracker_api.admin.pages.segment_pages import Download, SegmentPages
from tracker_api.admin.pages.settings_form import (
    CHOICE_SETTINGS,
    FLAG_SETTINGS,
    SETTING_UNITS,
    TEXTAREA_SETTINGS,
    setting_groups,
)
from tracker_api.web.auth import GLOBAL, PROJECT
from tracker_api.web.errors import Refused, admin_refusal
from tracker_core.admin import (
    backfeed_verbs,
    census_verbs,
    checks,
    claim_verbs,
    dead_verbs,
    item_story,
    item_verbs,
    limit_verbs,
    log_verbs,
    project_verbs,
)
from tracker_core.admin.errors import AdminError, BadInput
from tracker_core.admin.paging import SHARD_CURSOR_RE, face_cursor
from tracker_core.donelog import log_archive
from tracker_core.project import settings_schema

SAMPLE_DEFAULT = 20
QUEUES = ("todo", "backfeed", "secondary", "redo")  # the shared queues; downloader:NAME besides


class ProjectPages(FilterPages, SegmentPages):
    """A project's pages (GET /admin/P/VIEW) and the actions of their forms (POST /admin/P/ACTION)."""

    VIEWS = (
        "overview",
        "settings",
        "queues",
        "claims",
        "dead",
        "backfeed",
        "filter",
        "segments",
        "audit",
        "log",
        "item",
    )
    # action -> the view its form is on (where it goes back to, and where a refusal is shown).
    ACTIONS = {
        "add-items": "overview",
        "pause": "overview",
        "resume": "overview",
        "block": "overview",
        "delete": "overview",
        "settings": "settings",
        "limit-add": "settings",
        "limit-remove": "settings",
        "upload-target": "settings",
        "reclassify": "settings",
        "move": "queues",
        "clear": "queues",
        "redo": "queues",
        "release": "claims",
        "requeue": "dead",
        "secret-create": "backfeed",
        "secret-revoke": "backfeed",
        "shard-map": "backfeed",
        "shard-unmap": "backfeed",
        "filter": "filter",
        "segment-export": "segments",
        "segment-import": "segments",
    }

    def __init__(self, pages: Pages):
        self.pages = pages
        self.admin = pages.admin

    # GET

    def on_get(self, req, resp, project: str, name: str = "overview"):
        session = self.pages.session(req, PROJECT, project)
        if name not in self.VIEWS:
            raise Refused(404, f"no admin page {name[:80]!r}", "admin_bad_request", project)
        self._view(req, resp, session, project, name, req.get_param("done"))

    def _view(self, req, resp, session, project, name, message, status=falcon.HTTP_200, error=None, **extra):
        try:
            shown = project_verbs.show(self.admin, project)
        except AdminError as exc:
            raise admin_refusal(exc, None) from None
        context = {
            "title": f"{project} · {name} · admin",
            "project": project,
            "view": name,
            "views": self.VIEWS,
            "settings": shown["settings"],
            "shown": shown,
            "message": message,
            "error": error,
            "values": {},
            "continue_form": self._continue_form(req, name),
        }
        try:
            context.update(getattr(self, "_" + name)(req, project))
        except AdminError as exc:  # a query the verb refused (sample of a bad queue, ...)
            req.context.admin_refusal = admin_refusal(exc, project)
            context["error"] = FormError("query", req.context.admin_refusal.reason)
            status = req.context.admin_refusal.status
        except log_archive.LogUnreadable as exc:
            req.context.admin_refusal = Refused(503, str(exc), "admin_log_unreadable", project)
            context["error"] = FormError("query", str(exc))
            status = 503
        context.update(extra)
        # A refused query has nothing to list: the page's frame with the reason.
        failed = getattr(req.context, "admin_refusal", None) is not None
        self.pages.page(
            resp, "project_base.html" if failed else f"project_{name}.html", session, status, **context
        )
        refusal = getattr(req.context, "admin_refusal", None)
        if refusal is not None:
            req.context.admin_page = resp.text
            raise refusal

    @staticmethod
    def _continue_form(req, view: str):
        """After a paged action stopped at its budget: its fields, to go on from its cursor."""
        action = req.get_param("continue")
        cursor = req.get_param("cursor")
        if action not in ProjectPages.PAGED or ProjectPages.ACTIONS[action] != view:
            return None
        if not cursor or not (DIGITS_RE.match(cursor) or SHARD_CURSOR_RE.match(cursor)):
            return None
        fields = {n: req.get_param(n) or "" for n in ProjectPages.PAGED[action]}
        return {"action": action, "fields": {**fields, "cursor": cursor}}

    def _queue_names(self, status) -> list[str]:
        owners = sorted(status["queues"].get("downloader", {}))
        return [*QUEUES, *(f"downloader:{o}" for o in owners)]

    def _overview(self, req, project):
        status = census_verbs.status(self.admin, project)
        return {"counts": status, "queues": QUEUES}

    def _settings(self, req, project):
        return {
            "groups": setting_groups(),
            "meaning": {n: spec[2] for n, spec in settings_schema.SETTINGS.items()},
            "flags": FLAG_SETTINGS,
            "choices": CHOICE_SETTINGS,
            "textareas": TEXTAREA_SETTINGS,
            "units": SETTING_UNITS,
            "limits": limit_verbs.list_limits(self.admin, project),
        }

    def _queues(self, req, project):
        status = census_verbs.status(self.admin, project)
        context: dict[str, Any] = {"counts": status, "queue_names": self._queue_names(status), "sample": None}
        queue = req.get_param("sample")
        if queue:
            count = int_param(req, "count", SAMPLE_DEFAULT, checks.MAX_SAMPLE)
            context["sample"] = {"queue": queue, "count": count}
            context["sample"]["items"] = item_verbs.sample(self.admin, project, queue, count or 1)["items"]
        return context

    def _claims(self, req, project):
        pattern = req.get_param("pattern") or "*"
        cursor = face_cursor(req.get_param("cursor"))
        page = claim_verbs.list_claims(self.admin, project, cursor, LISTED, pattern)
        return {"claims": page, "pattern": pattern}

    def _dead(self, req, project):
        cursor = face_cursor(req.get_param("cursor"))
        status = census_verbs.status(self.admin, project)
        page = dead_verbs.list_dead(self.admin, project, cursor, LISTED)
        return {"dead": page, "queue_names": self._queue_names(status), "dead_total": status["dead"]}

    def _backfeed(self, req, project):
        cursor = int_param(req, "cursor", 0, checks.MAX_CURSOR)
        return {
            "secrets": backfeed_verbs.list_secrets(self.admin, project),
            "shards": backfeed_verbs.shard_map(self.admin, project, cursor, LISTED),
            "queue_names": QUEUES,
        }

    def _audit(self, req, project):
        before = req.get_param("before") or None
        return {"audit": log_verbs.audit_page(self.admin, project, LISTED, before), "audit_project": project}

    def _log(self, req, project):
        query = {n: req.get_param(n) or None for n in ("kind", "since", "downloader", "cursor")}
        page = log_verbs.done_page(
            self.admin,
            project,
            self.pages.segments_dir,
            kind=query["kind"] or "done",
            since=query["since"],
            downloader=query["downloader"],
            cursor=query["cursor"],
            limit=LISTED,
        )
        return {"log": page, "query": query, "kinds": tuple(log_archive.KINDS)}

    def _item(self, req, project):
        """An item's story (tracker_core.admin.item_story), looked up by the name typed."""
        name = req.get_param("name") or ""  # "lookup" in the page: render() takes "name" itself
        if not name:
            return {"lookup": "", "story": None}
        told = item_verbs.story(
            self.admin, project, self.pages.segments_dir, [name], item_story.STORY_BUDGET_S
        )
        return {"lookup": name, "story": told[0]}

    # POST

    def on_post(self, req, resp, project: str, name: str = "overview"):
        session, form = self.pages.posted(req, GLOBAL if name == "delete" else PROJECT, project)
        if name not in self.ACTIONS:
            raise Refused(404, f"no admin action {name[:80]!r}", "admin_bad_request", project)
        ctx = self.admin.as_actor(session.token.token_id)
        view = self.ACTIONS[name]
        try:
            answer = getattr(self, "_do_" + name.replace("-", "_"))(ctx, project, form)
        except AdminError as exc:
            refusal = admin_refusal(exc, project)
            values = {k: v for k, v in form.items() if k != "csrf"}
            page = falcon.Response()
            try:
                error = FormError(name, refusal.reason)
                self._view(req, page, session, project, view, None, refusal.status, error, values=values)
            except Refused:
                pass  # the page itself cannot be shown (the project is gone): the bare answer
            else:
                req.context.admin_page = page.text
            raise refusal from None
        if isinstance(answer, Download):  # a segment exported: the file itself
            answer.send(resp)
            return
        if isinstance(answer, dict):  # shown once: rendered now, never put in a URL
            self._view(req, resp, session, project, view, answer.pop("message"), **answer)
            return
        message, more = answer if isinstance(answer, tuple) else (answer, {})
        resp.status = falcon.HTTP_303
        if name == "delete":
            resp.location = "/admin?" + urllib.parse.urlencode({"done": message})
            return
        path = f"/admin/{project}" + ("" if view == "overview" else f"/{view}")
        resp.location = path + "?" + urllib.parse.urlencode({"done": message, **more})

    # Each action: (ctx acting as the logged-in token, project, form) -> a message for the page,
    # (message, query to continue), or a dict rendered at once (a secret shown once).

    PAGED = {
        "release": ("downloader", "older_than_s", "pattern"),
        "move": ("source", "target", "pattern"),
        "requeue": ("queue",),
        "redo": ("pattern", "queue", "even_if_offloaded"),
    }

    def _do_add_items(self, ctx, project, form):
        names = [n.strip() for n in form.get("items", "").splitlines() if n.strip()]
        # An uploaded file: only a line end ends a name (str.splitlines() also splits at NEL,
        # U+2028, FF and VT, which URL names may hold), as the API's upload reads it.
        names += [line.removesuffix("\r") for line in form.get("file", "").split("\n")]
        added = item_verbs.add(ctx, project, names, queue=form.text("queue") or "todo")
        return f"added {added['added']}, {added['duplicates']} already known"

    def _do_pause(self, ctx, project, form):
        project_verbs.pause(ctx, project)
        return "paused: nothing is handed out"

    def _do_resume(self, ctx, project, form):
        project_verbs.resume(ctx, project)
        return "resumed"

    def _do_delete(self, ctx, project, form):
        if form.text("confirm") != project:
            raise BadInput("type the project's name to confirm")
        project_verbs.delete(ctx, project)
        return f"project {project} deleted"

    def _do_block(self, ctx, project, form):
        remove = form.get("remove") == "1"
        entry = limit_verbs.block(ctx, form.text("entry"), project, remove)["entry"]
        return ("unblocked " if remove else "blocked ") + entry

    def _do_settings(self, ctx, project, form):
        """Save the settings the form changed (all of them would bump the age for nothing)."""
        current = project_verbs.show(ctx, project)["settings"]
        values = {k: form[k] for k in settings_schema.SETTINGS if k in form and form[k] != current.get(k)}
        if not values:
            return "no setting changed"
        age = project_verbs.set_settings(ctx, project, values)["settings_age"]
        return f"settings saved: {', '.join(sorted(values))} (age {age})"

    def _do_limit_add(self, ctx, project, form):
        name = form.text("name")
        limit_verbs.add(ctx, project, name, form.text("pattern"), form.text("rate"))
        return f"limit {name} set"

    def _do_limit_remove(self, ctx, project, form):
        name = form.text("name")
        limit_verbs.remove(ctx, project, name)
        return f"limit {name} removed"

    def _do_reclassify(self, ctx, project, form):
        return f"{limit_verbs.reclassify(ctx, project)['held']} queued items now held by the limits"

    def _do_upload_target(self, ctx, project, form):
        done = project_verbs.set_upload_target(ctx, project, form.text("url"), form.text("state") or "active")
        return f"upload target {done['url']} {done['state']}"

    def _do_move(self, ctx, project, form):
        source, target = form.text("source"), form.text("target")
        pattern = form.text("pattern") or "*"
        move = functools.partial(item_verbs.move, ctx, project, source, target, pattern)
        moved, cursor = paged(move, "moved", form_cursor(form))
        fields = {"source": source, "target": target, "pattern": pattern}
        return continued(f"moved {moved} from {source} to {target}", cursor, "move", fields)

    def _do_clear(self, ctx, project, form):
        queue = form.text("queue")
        if form.get("confirm") != "1":
            raise BadInput(f"tick the box to confirm clearing {queue}")
        return f"cleared {queue}: {item_verbs.clear(ctx, project, queue)['dropped']} dropped"

    def _do_redo(self, ctx, project, form):
        """Queue done (or seen) items again: the names typed, or done items matching a pattern
        page after page."""
        names = [n.strip() for n in form.get("items", "").splitlines() if n.strip()]
        pattern = form.text("pattern") or None
        queue = form.text("queue") or item_verbs.REDO_QUEUE
        offloaded = form.get("even_if_offloaded") == "1"
        if names and pattern:
            raise BadInput("give names or a pattern, not both")
        if names:
            done = item_verbs.redo_all(ctx, project, names=names, queue=queue, even_if_offloaded=offloaded)
            return f"requeued {done['requeued']} to {queue}, {done['skipped']} skipped"
        redo = functools.partial(
            item_verbs.redo, ctx, project, pattern=pattern, queue=queue, even_if_offloaded=offloaded
        )
        requeued, cursor = paged(redo, "requeued", form_cursor(form))
        fields = {"pattern": pattern or "", "queue": queue, "even_if_offloaded": "1" if offloaded else ""}
        return continued(f"requeued {requeued} to {queue}", cursor, "redo", fields)

    def _do_release(self, ctx, project, form):
        """Release a page of claims at a time until none is left, or the budget is spent."""
        downloader = form.text("downloader") or None
        pattern = form.text("pattern") or None
        age = form.text("older_than_s")
        try:
            older_than_s = float(age) if age else None
        except ValueError:
            raise BadInput("'older_than_s' must be a number of seconds") from None
        release = functools.partial(
            claim_verbs.release,
            ctx,
            project,
            downloader=downloader,
            older_than_s=older_than_s,
            pattern=pattern,
        )
        released, cursor = paged(release, "released", form_cursor(form))
        fields = {"downloader": downloader or "", "older_than_s": age, "pattern": pattern or ""}
        return continued(f"released {released}", cursor, "release", fields)

    def _do_requeue(self, ctx, project, form):
        """Requeue the dead items ticked, or (all=1) every dead item page after page."""
        queue = form.text("queue") or "todo"
        if form.get("all") != "1":
            names = form.every("item")
            if not names:
                raise BadInput("tick the dead items to requeue, or requeue all")
            return f"requeued {dead_verbs.requeue(ctx, project, names, queue)['requeued']} to {queue}"
        requeue = functools.partial(dead_verbs.requeue_page, ctx, project, queue=queue)
        requeued, cursor = paged(requeue, "requeued", form_cursor(form))
        fields = {"queue": queue, "all": "1"}
        return continued(f"requeued {requeued} to {queue}", cursor, "requeue", fields)

    def _do_secret_create(self, ctx, project, form):
        made = backfeed_verbs.create_secret(ctx, project)
        return {"message": f"backfeed secret {made['id']} created", "created_secret": made}

    def _do_secret_revoke(self, ctx, project, form):
        return f"backfeed secret {backfeed_verbs.revoke_secret(ctx, project, form.text('id'))['revoked']} revoked"

    def _do_shard_map(self, ctx, project, form):
        done = backfeed_verbs.map_shard(ctx, project, form.text("shard"), form.text("queue"))
        return f"backfeed shard {done['shard']} goes to {done['queue']}"

    def _do_shard_unmap(self, ctx, project, form):
        done = backfeed_verbs.unmap_shard(ctx, project, form.text("shard"))
        return f"backfeed shard {done['shard']} goes to {done['queue']}"
