"""Server-rendered admin pages for the daily operations: add items, limits, release, block.

The same tokens as the API: the login form stores the token in an HttpOnly, SameSite=Strict
cookie scoped to /admin, and every form carries a CSRF field derived from it (an HMAC only the
holder of the token can compute), so another site can make a browser neither read nor post.
The login form carries a nonce its own cookie holds (login CSRF), a post whose Origin is
another host is refused, and the pages may not be framed or cached (web_headers).
A form's action is a thin adapter over an admin verb (tracker_core.admin), which audits it
with the token's id; a refusal is the admin faces' one error map (tracker_api.errors:
BadInput 400, NotFound 404, Conflict 409), shown in a page.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
import time
import urllib.parse

import falcon

from tracker_api.auth import ANY, PROJECT, Authenticator
from tracker_api.errors import Refused, admin_refusal
from tracker_core import hq as registry
from tracker_core.admin import census, checks, hq, items, limits, projects
from tracker_core.admin import claims as claim_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput

COOKIE = "tracker_admin"
LOGIN_COOKIE = "tracker_login"  # the login form's CSRF nonce
LOGIN_NONCE_S = 3600
MAX_FORM_BYTES = 16 << 20
LIMIT_SETTINGS = (
    "rate_limit",
    "rate_burst",
    "max_claims_per_downloader",
    "max_multi",
    "min_version",
    "paused",
)
# One release from the page works through at most this many pages of claims (MAX_PAGE each)
# or this many seconds, then offers to continue from where it stopped.
RELEASE_PAGES = 20
RELEASE_SECONDS = 2.0
RELEASE_FIELDS = ("downloader", "older_than_s", "pattern")
WARRIORS_SHOWN = 50
# The forms' actions: POST /admin/P/ACTION runs ProjectAction._ACTION (dashes as underscores).
PAGE_ACTIONS = frozenset({"add-items", "limits", "limit-add", "limit-remove", "release", "block"})


def csrf_for(token_text: str) -> str:
    return hmac.new(token_text.encode(), b"tracker admin csrf", hashlib.sha256).hexdigest()


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
        "</title><link rel=stylesheet href=/static/admin.css></head><body>"
        f"<h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _form(action: str, csrf: str, fields: str, button: str) -> str:
    return (
        f'<form method=post action="{html.escape(action)}">'
        f'<input type=hidden name=csrf value="{csrf}">{fields}'
        f"<button>{html.escape(button)}</button></form>"
    )


def _hidden(name: str, value: str) -> str:
    return f'<input type=hidden name="{html.escape(name)}" value="{html.escape(value)}">'


def _when(ms) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(ms) / 1000))


def _warriors_section(ctx: AdminContext, token) -> str:
    """Registered warriors by last heartbeat (global admins see the registry, others the count)."""
    within_min = registry.ONLINE_WITHIN_MS // 60_000
    body = (
        f"<h2>Warriors</h2><p>{registry.online_count(ctx.conn)} online (a heartbeat in the last "
        f"{within_min} minutes)</p>"
    )
    if not token.is_global:
        return body
    rows = []
    for w in hq.warriors(ctx, 0, WARRIORS_SHOWN)["warriors"]:
        registered = w.get("warrior") if isinstance(w.get("warrior"), dict) else {}
        version = w.get("version") or registered.get("version", "")
        lat_lng = w.get("lat_lng")
        cells = (
            w["warrior_id"][:12],
            w.get("downloader", ""),
            w.get("selected_project", ""),
            version,
            w.get("ip", ""),
            ", ".join(f"{x:g}" for x in lat_lng) if lat_lng else "",
        )
        rows.append(
            "<tr>"
            + "".join(f"<td>{html.escape(str(c)[:64])}</td>" for c in cells)
            + f"<td>{_when(w['last_seen_ms'])}</td>"
            + f"<td>{'yes' if w.get('online') else 'no'}</td></tr>"
        )
    return body + (
        "<table><tr><th>warrior</th><th>downloader</th><th>project</th><th>version</th>"
        "<th>IP</th><th>position</th><th>last heartbeat</th><th>online</th></tr>"
        f"{''.join(rows)}</table>"
        if rows
        else "<p>none registered</p>"
    )


def _check_origin(req, project) -> None:
    """Refuse a form posted from another site (a second check beside the CSRF field).

    Browsers send Origin on every POST; a request without one is not a browser's cross-site
    post. Only the host is compared: behind a TLS proxy the scheme and port differ.
    """
    origin = req.get_header("Origin")
    if origin is None:
        return
    if urllib.parse.urlsplit(origin).hostname != (req.host or "").lower():
        raise Refused(403, "form posted from another site", "admin_bad_origin", project)


def _read_form(req, project) -> dict[str, str]:
    if req.content_length is not None and req.content_length > MAX_FORM_BYTES:
        raise Refused(413, "form too large", "admin_too_large", project)
    raw = req.bounded_stream.read(MAX_FORM_BYTES + 1)
    if len(raw) > MAX_FORM_BYTES:
        raise Refused(413, "form too large", "admin_too_large", project)
    try:
        pairs = urllib.parse.parse_qsl(raw.decode("utf-8"), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return dict(pairs)


class AdminPages:
    def __init__(self, admin: AdminContext):
        self.admin = admin
        self.auth = Authenticator(admin.conn)

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
            pass  # no cookie, or a revoked token: show the login form
        if token is None:
            # Login CSRF: the form's field must equal a cookie only this page sets (SameSite
            # Strict, so another site's form posted at /admin arrives without it): nobody can
            # log a browser in with a token of theirs and watch what the victim types.
            nonce = secrets.token_hex(16)
            resp.set_cookie(
                LOGIN_COOKIE,
                nonce,
                path="/admin",
                http_only=True,
                same_site="Strict",
                secure=req.scheme == "https",
                max_age=LOGIN_NONCE_S,
            )
            resp.text = _page(
                "Tracker admin",
                "<form method=post action=/admin>"
                f'<input type=hidden name=csrf value="{nonce}">'
                "<label>Admin token <input name=token type=password size=70>"
                "</label><button>Log in</button></form>",
            )
            return
        names = [n for n in projects.list_projects(self.admin) if token.allows(n)]
        links = "".join(f'<li><a href="/admin/{html.escape(n)}">{html.escape(n)}</a></li>' for n in names)
        resp.text = _page("Tracker admin", f"<ul>{links}</ul>" + _warriors_section(self.admin, token))

    def on_post(self, req, resp):
        _check_origin(req, None)
        form = _read_form(req, None)
        nonce = req.cookies.get(LOGIN_COOKIE, "")
        if not nonce or not hmac.compare_digest(form.get("csrf", ""), nonce):
            raise Refused(403, "bad or missing CSRF field: reload the login page", "admin_bad_csrf")
        text = form.get("token", "").strip()
        self.auth.check(text, ANY)  # 401 for a bad token; nothing is set
        resp.unset_cookie(LOGIN_COOKIE, path="/admin")
        resp.set_cookie(
            COOKIE,
            text,
            path="/admin",
            http_only=True,
            same_site="Strict",
            secure=req.scheme == "https",
            max_age=12 * 3600,
        )
        resp.status = falcon.HTTP_303
        resp.location = "/admin"


def _blocks_list(shown: dict) -> str:
    """The project's own blocks and the global ones it sees (lifted apart)."""
    ignored = shown["settings"].get("ignore_global_blocked") == "1"
    rows = [
        ("this project", shown.get("blocked", [])),
        (
            "global" + (" (ignored here: ignore_global_blocked)" if ignored else ""),
            shown.get("blocked_global", []),
        ),
    ]
    return "".join(
        f"<p>{html.escape(label)}: {html.escape(', '.join(entries)) if entries else 'none'}</p>"
        for label, entries in rows
    )


class ProjectPage:
    def __init__(self, pages: AdminPages):
        self.pages = pages
        self.admin = pages.admin

    def on_get(self, req, resp, project: str):
        text, _ = self.pages._token(req, PROJECT, project)
        try:
            status = census.status(self.admin, project)
            shown = projects.show(self.admin, project)
            listed = limits.list_limits(self.admin, project)
        except AdminError as exc:
            raise admin_refusal(exc, None) from None
        csrf = csrf_for(text)
        base = f"/admin/{project}/"
        queues = "".join(
            f"<tr><td>{html.escape(q)}</td><td>{n}</td></tr>"
            for q, n in status["queues"].items()
            if q != "downloader"
        )
        setting_fields = "".join(
            f'<label>{name} <input name="{name}" value="{html.escape(shown["settings"].get(name, ""))}">'
            "</label><br>"
            for name in LIMIT_SETTINGS
        )
        pattern_limits = "".join(
            f"<tr><td>{html.escape(x['name'])}</td><td>{html.escape(x['pattern'])}</td>"
            f"<td>{html.escape(x['rate'])}</td><td>"
            + _form(base + "limit-remove", csrf, _hidden("name", x["name"]), "Remove")
            + "</td></tr>"
            for x in listed
        )
        message = req.get_param("done")
        body = (
            (f"<p class=done>{html.escape(message)}</p>" if message else "")
            + f"<p>out: {status['out']} · done: {status['done']}</p>"
            f"<table><tr><th>queue</th><th>items</th></tr>{queues}</table>"
            "<h2>Add items</h2>"
            + _form(
                base + "add-items",
                csrf,
                "<textarea name=items rows=8 cols=60></textarea><br>"
                "<label>queue <input name=queue value=todo></label>",
                "Add",
            )
            + "<h2>Limits</h2>"
            + _form(base + "limits", csrf, setting_fields, "Save")
            + "<h3>Pattern and item-type limits</h3><p>Items that match share one rate; the first "
            "matching limit wins. Patterns: type:T, prefix:P, domain:D or regex:R.</p>"
            "<table><tr><th>name</th><th>pattern</th><th>rate</th><th></th></tr>"
            f"{pattern_limits}</table>"
            + _form(
                base + "limit-add",
                csrf,
                "<label>name <input name=name></label> <label>pattern <input name=pattern>"
                "</label> <label>rate <input name=rate placeholder=10/m></label> ",
                "Add limit",
            )
            + "<h2>Release claims</h2>"
            + self._continue_release(req, base, csrf)
            + _form(
                base + "release",
                csrf,
                "<label>held by downloader <input name=downloader></label> or "
                "<label>older than (s) <input name=older_than_s></label> or "
                "<label>item names matching <input name=pattern placeholder=glob></label><br>",
                "Release",
            )
            + "<h2>Block</h2>"
            + _blocks_list(shown)
            + _form(
                base + "block",
                csrf,
                "<label>ip:ADDRESS, ip:CIDR or name:DOWNLOADER "
                "<input name=entry></label> "
                "<label><input type=checkbox name=remove value=1> unblock</label>",
                "Apply",
            )
        )
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _page(f"{project} · admin", body)

    @staticmethod
    def _continue_release(req, base: str, csrf: str) -> str:
        """After a release that stopped at its budget: a button that goes on from its cursor."""
        cursor = req.get_param("release_cursor")
        if not cursor or not cursor.isdigit():
            return ""
        fields = "".join(_hidden(name, req.get_param(name) or "") for name in RELEASE_FIELDS)
        return (
            "<p>Claims matching that filter are left."
            + _form(base + "release", csrf, fields + _hidden("cursor", cursor), "Continue releasing")
            + "</p>"
        )


class ProjectAction:
    """POST /admin/P/ACTION from the forms above: check token and CSRF, run the verb, go back."""

    def __init__(self, pages: AdminPages):
        self.pages = pages
        self.admin = pages.admin

    def on_post(self, req, resp, project: str, action: str):
        text, token = self.pages._token(req, PROJECT, project)
        _check_origin(req, project)
        form = _read_form(req, project)
        if not hmac.compare_digest(form.get("csrf", ""), csrf_for(text)):
            raise Refused(403, "bad or missing CSRF field: reload the page", "admin_bad_csrf", project)
        if action not in PAGE_ACTIONS:
            raise Refused(404, f"no admin action {action[:80]!r}", "admin_bad_request", project)
        handler = getattr(self, "_" + action.replace("-", "_"))
        try:
            message, *more = handler(self.admin.as_actor(token.token_id), project, form)
        except AdminError as exc:
            raise admin_refusal(exc, project) from None
        resp.status = falcon.HTTP_303
        resp.location = f"/admin/{project}?" + urllib.parse.urlencode(
            {"done": message, **(more[0] if more else {})}
        )

    # Each action: (ctx acting as the logged-in token, project, form) -> (message[, more query]).

    def _add_items(self, ctx, project, form):
        names = [n.strip() for n in form.get("items", "").splitlines() if n.strip()]
        added = items.add(ctx, project, names, queue=form.get("queue") or "todo")
        return (f"added {added['added']}, {added['duplicates']} already known",)

    def _limits(self, ctx, project, form):
        values = {k: form[k] for k in LIMIT_SETTINGS if k in form}
        return (f"settings saved (age {projects.set_settings(ctx, project, values)['settings_age']})",)

    def _limit_add(self, ctx, project, form):
        name, pattern = form.get("name", "").strip(), form.get("pattern", "").strip()
        limits.add(ctx, project, name, pattern, form.get("rate", "").strip())
        return (f"limit {name} set",)

    def _limit_remove(self, ctx, project, form):
        name = form.get("name", "").strip()
        limits.remove(ctx, project, name)
        return (f"limit {name} removed",)

    def _release(self, ctx, project, form):
        """Release a page of claims at a time until none is left, or the budget is spent (each
        page is one release, audited on its own)."""
        downloader = form.get("downloader", "").strip() or None
        pattern = form.get("pattern", "").strip() or None
        age = form.get("older_than_s", "").strip()
        try:
            older_than_s = float(age) if age else None
        except ValueError:
            raise BadInput("'older_than_s' must be a number of seconds") from None
        cursor = form.get("cursor", "0").strip() or "0"
        if not cursor.isdigit() or len(cursor) > 20:
            raise BadInput("cursor must be a number")
        cursor = int(cursor)
        released, deadline = 0, time.monotonic() + RELEASE_SECONDS
        for _ in range(RELEASE_PAGES):
            page = claim_verbs.release(
                ctx,
                project,
                downloader=downloader,
                older_than_s=older_than_s,
                pattern=pattern,
                cursor=cursor,
                limit=checks.MAX_PAGE,
            )
            released, cursor = released + page["released"], page["cursor"]
            if cursor == 0:
                cursor = 0
                break
            if time.monotonic() > deadline:
                break
        more = {}
        if cursor:  # stopped at the budget: the page offers to continue from here
            more = {
                "release_cursor": cursor,
                "downloader": downloader or "",
                "older_than_s": age,
                "pattern": pattern or "",
            }
        return f"released {released}" + ("; more left, continue below" if cursor else ""), more

    def _block(self, ctx, project, form):
        remove = form.get("remove") == "1"
        entry = limits.block(ctx, form.get("entry", "").strip(), project, remove)["entry"]
        return (("unblocked " if remove else "blocked ") + entry,)


def add_admin_pages(app, admin: AdminContext) -> None:
    pages = AdminPages(admin)
    app.add_route("/admin", pages)
    app.add_route("/admin/{project}", ProjectPage(pages))
    app.add_route("/admin/{project}/{action}", ProjectAction(pages))
