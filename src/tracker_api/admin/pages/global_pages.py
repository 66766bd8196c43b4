"""/admin/-/NAME: tokens, global blocks, the HQ document, the warrior registry, the audit log."""

from __future__ import annotations

import urllib.parse

import falcon

from tracker_api.admin.pages.base import GLOBAL_PATH, LISTED, Pages
from tracker_api.admin.pages.forms import COOKIE, FormError
from tracker_api.admin.pages.index_page import AdminIndex
from tracker_api.admin.pages.paging import int_param
from tracker_api.admin.pages.reindex_action import ReindexAction
from tracker_api.web.auth import ANY, GLOBAL
from tracker_api.web.errors import Refused, admin_refusal
from tracker_core.admin import hq_verbs, limit_verbs, log_verbs, project_verbs, token_verbs
from tracker_core.admin.errors import AdminError
from tracker_core.warriors import hq

WARRIORS_SHOWN = 50


# Page titles where the page name is not already one (hq is an abbreviation).
TITLES = {"hq": "HQ document", "warriors": "Warrior registry", "audit": "Audit log"}


class GlobalPages(ReindexAction):
    """Tokens, global blocks, the HQ document, the warrior registry, the audit log, logout."""

    VIEWS = frozenset({"tokens", "blocks", "hq", "warriors", "audit"})
    # action -> the view its form is on (logout and create-project live on the index).
    ACTIONS = {
        "logout": None,
        "create-project": None,
        "token-create": "tokens",
        "token-revoke": "tokens",
        "block": "blocks",
        "blocks-reindex": "blocks",
        "hq": "hq",
        "hq-banner": "hq",  # its own form, so a refusal shows beside the banner alone
    }

    def __init__(self, pages: Pages, index: AdminIndex):
        self.pages = pages
        self.admin = pages.admin
        self.index = index

    def on_get(self, req, resp, name: str):
        if name not in self.VIEWS:
            raise Refused(404, f"no admin page {name[:80]!r}", "admin_bad_request")
        session = self.pages.session(req, ANY if name == "warriors" else GLOBAL)
        self._view(req, resp, session, name, req.get_param("done"))

    def _view(
        self, req, resp, session, name, message, status=falcon.HTTP_200, error=None, values=None, **extra
    ):
        context = dict(
            title=f"{TITLES.get(name, name.capitalize())} · admin", view=name, message=message, error=error
        )
        context["values"] = values or {}
        try:
            context.update(getattr(self, "_" + name)(req, session))
        except AdminError as exc:  # a query the verb refused (a bad cursor, ...)
            req.context.admin_refusal = admin_refusal(exc, None)
            context["error"] = FormError("query", req.context.admin_refusal.reason)
            status = req.context.admin_refusal.status
        context.update(extra)
        # A refused query has nothing to list: the page's frame with the reason.
        failed = getattr(req.context, "admin_refusal", None) is not None
        self.pages.page(resp, "base.html" if failed else f"global_{name}.html", session, status, **context)
        refusal = getattr(req.context, "admin_refusal", None)
        if refusal is not None:
            req.context.admin_page = resp.text
            raise refusal

    def _tokens(self, req, session):
        return {
            "tokens": token_verbs.list_tokens(self.admin)["tokens"],
            "projects": project_verbs.list_projects(self.admin),
        }

    def _blocks(self, req, session):
        return {"blocked": limit_verbs.blocks(self.admin)["global"]}

    def _hq(self, req, session):
        current = hq_verbs.show_fields(self.admin)["hq"]
        return {"current": current, "projects": project_verbs.list_projects(self.admin)}

    def _warriors(self, req, session):
        offset = int_param(req, "offset", 0, hq_verbs.MAX_OFFSET)
        if not session.token.is_global:  # project admins see how many, not who
            return {"registry": None, "offset": 0, "shown": WARRIORS_SHOWN, **self._online()}
        page = hq_verbs.warriors(self.admin, offset, WARRIORS_SHOWN)
        return {"registry": page, "offset": offset, "shown": WARRIORS_SHOWN, **self._online()}

    def _online(self):
        return {
            "online": hq.online_count(self.admin.conn),
            "online_within_min": hq.ONLINE_WITHIN_MS // 60_000,
        }

    def _audit(self, req, session):
        before = req.get_param("before") or None
        return {"audit": log_verbs.audit_page(self.admin, None, LISTED, before), "audit_project": None}

    def on_post(self, req, resp, name: str):
        if name not in self.ACTIONS:
            self.pages.session(req, ANY)
            raise Refused(404, f"no admin action {name[:80]!r}", "admin_bad_request")
        logout = name == "logout"  # the one post a read-only token may make
        session, form = self.pages.posted(req, ANY if logout else GLOBAL, writes=not logout)
        if name == "logout":
            resp.unset_cookie(COOKIE, path="/admin")
            resp.status = falcon.HTTP_303
            resp.location = "/admin"
            return
        ctx = self.admin.as_actor(session.token.token_id)
        view = self.ACTIONS[name]
        try:
            answer = getattr(self, "_do_" + name.replace("-", "_"))(ctx, form)
        except AdminError as exc:
            refusal = admin_refusal(exc, None)
            error, values = FormError(name, refusal.reason), {k: v for k, v in form.items() if k != "csrf"}
            page = falcon.Response()
            if view is None:
                self.index._index(page, session, None, refusal.status, error, values)
            else:
                self._view(req, page, session, view, None, refusal.status, error, values)
            req.context.admin_page = page.text
            raise refusal from None
        if isinstance(answer, dict):  # shown once: rendered now, never put in a URL
            self._view(req, resp, session, view, answer.pop("message"), **answer)
            return
        resp.status = falcon.HTTP_303
        target = f"/admin/{GLOBAL_PATH}/{view}" if view else "/admin"
        resp.location = target + "?" + urllib.parse.urlencode({"done": answer})

    def _do_create_project(self, ctx, form):
        name = form.text("project")
        title = form.text("title")
        project_verbs.create(ctx, name, {"title": title} if title else None)
        return f"project {name} created"

    def _do_token_create(self, ctx, form):
        made = token_verbs.create(
            ctx, form.text("scope"), form.text("note"), form.get("read_only") == "1", form.text("expires")
        )
        return {"message": f"token {made['token_id']} created", "created_token": made}

    def _do_token_revoke(self, ctx, form):
        return f"token {token_verbs.revoke(ctx, form.text('token_id'))['revoked']} revoked"

    def _do_block(self, ctx, form):
        remove = form.get("remove") == "1"
        entry = limit_verbs.block(ctx, form.text("entry"), None, remove)["entry"]
        return ("unblocked " if remove else "blocked ") + entry + " everywhere"

    def _do_hq(self, ctx, form):
        values = {n: form[n] for n in hq.HQ_FIELDS if n in form}
        hq_verbs.set_fields(ctx, values)
        return "HQ document saved: " + ", ".join(sorted(values))

    _do_hq_banner = _do_hq
