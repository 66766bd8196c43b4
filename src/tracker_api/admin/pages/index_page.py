"""/admin: the login form, and once logged in the projects (with their leaderboards)."""

from __future__ import annotations

import hmac
import secrets

import falcon

from tracker_api.admin.pages.base import Pages
from tracker_api.admin.pages.forms import (
    COOKIE,
    LOGIN_COOKIE,
    LOGIN_NONCE_S,
    FormError,
    check_origin,
    read_form,
)
from tracker_api.web.auth import ANY
from tracker_api.web.errors import Refused
from tracker_core.admin import project_verbs
from tracker_core.warriors import hq

SESSION_S = 12 * 3600  # how long a login lasts


def _set_cookie(req, resp, name: str, value: str, max_age_s: int) -> None:
    """A cookie only /admin sees, never scripts (HttpOnly) nor other sites' requests (Strict)."""
    resp.set_cookie(
        name,
        value,
        path="/admin",
        http_only=True,
        same_site="Strict",
        secure=req.scheme == "https",
        max_age=max_age_s,
    )


class AdminIndex:
    def __init__(self, pages: Pages):
        self.pages = pages
        self.admin = pages.admin

    def on_get(self, req, resp):
        try:
            session = self.pages.session(req, ANY)
        except Refused:
            session = None  # no cookie, or a revoked token: show the login form
        if session is None:
            self._login_form(req, resp)
            return
        self._index(resp, session, req.get_param("done"))

    def _index(self, resp, session, message, status=falcon.HTTP_200, error=None, values=None):
        names = [n for n in project_verbs.list_projects(self.admin) if session.token.allows(n)]
        self.pages.page(
            resp,
            "index.html",
            session,
            status,
            title="Tracker admin",
            projects=names,
            online=hq.online_count(self.admin.conn),
            online_within_min=hq.ONLINE_WITHIN_MS // 60_000,
            message=message,
            error=error,
            values=values or {},
        )

    def _login_form(self, req, resp, nonce=None, status=falcon.HTTP_200, error=None):
        if nonce is None:
            # Login CSRF: the form's field must equal a cookie only this page sets (SameSite
            # Strict, so another site's form posted at /admin arrives without it): nobody can
            # log a browser in with a token of theirs and watch what the victim types.
            nonce = secrets.token_hex(16)
            _set_cookie(req, resp, LOGIN_COOKIE, nonce, LOGIN_NONCE_S)
        self.pages.page(
            resp, "login.html", None, status, title="Tracker admin: log in", nonce=nonce, error=error
        )

    def on_post(self, req, resp):
        check_origin(req, None)
        form = read_form(req, None)
        nonce = req.cookies.get(LOGIN_COOKIE, "")
        if not nonce or not hmac.compare_digest(form.get("csrf", ""), nonce):
            raise Refused(403, "bad or missing CSRF field: reload the login page", "admin_bad_csrf")
        text = form.text("token")
        try:
            self.pages.auth.check(text, ANY)  # 401 for a bad token; nothing is set
        except Refused as refusal:
            # The form again with the reason (its nonce stays valid); the token is not echoed.
            page = falcon.Response()
            self._login_form(req, page, nonce, refusal.status, FormError("login", refusal.reason))
            req.context.admin_page = page.text
            raise
        resp.unset_cookie(LOGIN_COOKIE, path="/admin")
        _set_cookie(req, resp, COOKIE, text, SESSION_S)
        resp.status = falcon.HTTP_303
        resp.location = "/admin"
