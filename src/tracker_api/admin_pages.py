"""Server-rendered admin pages for the daily operations: add items, limits, release, block.

The same tokens as the API: the login form stores the token in an HttpOnly, SameSite=Strict
cookie scoped to /admin, and every form carries a CSRF field derived from it (an HMAC only the
holder of the token can compute), so another site can make a browser neither read nor post.
Changes go through the same operations as the API and CLI, and into the audit log.
"""
from __future__ import annotations

import hashlib
import hmac
import html
import urllib.parse

import falcon

from tracker_api.auth import ANY, PROJECT, Authenticator
from tracker_api.errors import Refused
from tracker_core import audit, operations
from tracker_core.admin import Admin, AdminError

COOKIE = "tracker_admin"
MAX_FORM_BYTES = 16 << 20
LIMIT_SETTINGS = ("rate_limit", "rate_burst", "max_claims_per_downloader", "max_multi",
                  "min_version", "paused")


def csrf_for(token_text: str) -> str:
    return hmac.new(token_text.encode(), b"tracker admin csrf", hashlib.sha256).hexdigest()


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
            "</title><link rel=stylesheet href=/static/admin.css></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}</body></html>")


def _form(action: str, csrf: str, fields: str, button: str) -> str:
    return (f'<form method=post action="{html.escape(action)}">'
            f'<input type=hidden name=csrf value="{csrf}">{fields}'
            f"<button>{html.escape(button)}</button></form>")


def _read_form(req, project) -> dict[str, str]:
    if req.content_length is not None and req.content_length > MAX_FORM_BYTES:
        raise Refused(413, "form too large", "admin_too_large", project)
    raw = req.bounded_stream.read(MAX_FORM_BYTES + 1)
    if len(raw) > MAX_FORM_BYTES:
        raise Refused(413, "form too large", "admin_too_large", project)
    try:
        pairs = urllib.parse.parse_qsl(raw.decode("utf-8"), keep_blank_values=True,
                                       max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return dict(pairs)


class AdminPages:
    def __init__(self, admin: Admin):
        self.admin = admin
        self.auth = Authenticator(admin.r)

    def _token(self, req, needs: str, project: str | None = None):
        text = req.cookies.get(COOKIE, "")
        if not text:
            raise Refused(401, "log in at /admin first", "admin_unauthenticated")
        return text, self.auth.check(text, needs, project)

    # GET /admin and POST /admin (login)
    def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_HTML
        token = None
        try:
            token = self._token(req, ANY)[1]
        except Refused:
            pass            # no cookie, or a revoked token: show the login form
        if token is None:
            resp.text = _page("Tracker admin", '<form method=post action=/admin>'
                              '<label>Admin token <input name=token type=password size=70>'
                              "</label><button>Log in</button></form>")
            return
        names = [n for n in self.admin.projects() if token.allows(n)]
        links = "".join(f'<li><a href="/admin/{html.escape(n)}">{html.escape(n)}</a></li>'
                        for n in names)
        resp.text = _page("Tracker admin", f"<ul>{links}</ul>")

    def on_post(self, req, resp):
        text = _read_form(req, None).get("token", "").strip()
        self.auth.check(text, ANY)     # 401 for a bad token; nothing is set
        resp.set_cookie(COOKIE, text, path="/admin", http_only=True, same_site="Strict",
                        secure=req.scheme == "https", max_age=12 * 3600)
        resp.status = falcon.HTTP_303
        resp.location = "/admin"


class ProjectPage:
    def __init__(self, pages: AdminPages):
        self.pages = pages
        self.admin = pages.admin

    def on_get(self, req, resp, project: str):
        text, _ = self.pages._token(req, PROJECT, project)
        try:
            status = self.admin.status(project)
            shown = self.admin.show_project(project)
        except AdminError as exc:
            raise Refused(404, str(exc), "admin_bad_request", None) from None
        csrf = csrf_for(text)
        base = f"/admin/{project}/"
        queues = "".join(f"<tr><td>{html.escape(q)}</td><td>{n}</td></tr>"
                         for q, n in status["queues"].items() if q != "downloader")
        limits = "".join(
            f'<label>{name} <input name="{name}" value="{html.escape(shown["settings"].get(name, ""))}">'
            "</label><br>" for name in LIMIT_SETTINGS)
        message = req.get_param("done")
        body = (
            (f"<p class=done>{html.escape(message)}</p>" if message else "")
            + f"<p>out: {status['out']} · done: {status['done']}</p>"
            f"<table><tr><th>queue</th><th>items</th></tr>{queues}</table>"
            "<h2>Add items</h2>" + _form(base + "add-items", csrf,
                                         "<textarea name=items rows=8 cols=60></textarea><br>"
                                         "<label>queue <input name=queue value=todo></label>", "Add")
            + "<h2>Limits</h2>" + _form(base + "limits", csrf, limits, "Save")
            + "<h2>Release claims</h2>" + _form(
                base + "release", csrf,
                "<label>held by downloader <input name=downloader></label> or "
                "<label>older than (s) <input name=older_than_s></label><br>", "Release")
            + "<h2>Block</h2>" + _form(
                base + "block", csrf, "<label>ip:ADDRESS or name:DOWNLOADER <input name=entry>"
                "</label> <label><input type=checkbox name=remove value=1> unblock</label>",
                "Apply"))
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _page(f"{project} · admin", body)


class ProjectAction:
    """POST /admin/P/ACTION from the forms above: check token and CSRF, act, audit, go back."""

    def __init__(self, pages: AdminPages):
        self.pages = pages
        self.admin = pages.admin

    def on_post(self, req, resp, project: str, action: str):
        text, token = self.pages._token(req, PROJECT, project)
        form = _read_form(req, project)
        if not hmac.compare_digest(form.get("csrf", ""), csrf_for(text)):
            raise Refused(403, "bad or missing CSRF field: reload the page", "admin_bad_csrf",
                          project)
        handler = getattr(self, "_" + action.replace("-", "_"), None)
        if handler is None or action.startswith("_"):
            raise Refused(404, f"no admin action {action!r}", "admin_bad_request", project)
        try:
            message, detail = handler(project, form)
        except (AdminError, ValueError) as exc:
            raise Refused(400, str(exc).splitlines()[0], "admin_bad_request", project) from None
        audit.record(self.admin.r, token.token_id, "page." + action, project, **detail)
        resp.status = falcon.HTTP_303
        resp.location = f"/admin/{project}?" + urllib.parse.urlencode({"done": message})

    def _add_items(self, project, form):
        names = [n.strip() for n in form.get("items", "").splitlines() if n.strip()]
        queue = form.get("queue") or "todo"
        added = duplicates = 0
        for a, d in self.admin.add_items(project, names, queue=queue):
            added, duplicates = added + a, duplicates + d
        return f"added {added}, {duplicates} already known", {"queue": queue, "added": added}

    def _limits(self, project, form):
        values = {k: form[k] for k in LIMIT_SETTINGS if k in form}
        age = self.admin.set_settings(project, values)
        return f"settings saved (age {age})", {"settings": values}

    def _release(self, project, form):
        downloader = form.get("downloader", "").strip() or None
        age = form.get("older_than_s", "").strip()
        result = operations.release(self.admin, project, downloader=downloader,
                                    older_than_s=float(age) if age else None,
                                    limit=operations.MAX_PAGE)
        return f"released {result['released']}", {"downloader": downloader, "older_than_s": age,
                                                  "released": result["released"]}

    def _block(self, project, form):
        entry, remove = form.get("entry", "").strip(), form.get("remove") == "1"
        self.admin.block(entry, project, remove)
        return ("unblocked " if remove else "blocked ") + entry, {"entry": entry, "remove": remove}


def add_admin_pages(app, admin: Admin) -> None:
    pages = AdminPages(admin)
    app.add_route("/admin", pages)
    app.add_route("/admin/{project}", ProjectPage(pages))
    app.add_route("/admin/{project}/{action}", ProjectAction(pages))
