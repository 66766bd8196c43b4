"""Server-rendered admin pages: every admin verb behind a form, rendered with Jinja2.

The same tokens as the API: the login form stores the token in an HttpOnly, SameSite=Strict
cookie scoped to /admin, and every form carries a CSRF field derived from it (an HMAC only the
holder of the token can compute), so another site can make a browser neither read nor post.
The login form carries a nonce its own cookie holds (login CSRF), a post whose Origin is
another host is refused, and the pages may not be framed or cached (web_headers).

Pages: ``/admin`` (login, or the projects), ``/admin/-/NAME`` (global pages and their forms;
``-`` is never a project name) and ``/admin/P[/NAME]`` (a project's pages; a POST to
``/admin/P/ACTION`` runs one form's action). An action is a thin adapter over an admin verb
(tracker_core.admin), which audits it with the token's id. A refusal is the admin faces' one
error map (tracker_api.errors.admin_refusal: status and counter); its answer is the page the
form was on, with the reason beside the form and what was entered kept (FormErrorPage).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import secrets
import time
import urllib.parse
from pathlib import Path

import falcon
import jinja2
from falcon.media.multipart import MultipartFormHandler

from tracker_api.admin_api import DEFAULT_SEGMENTS_DIR, DIGITS_RE, MAX_UPLOAD_BYTES
from tracker_api.auth import ANY, GLOBAL, PROJECT, Authenticator
from tracker_api.errors import Refused, admin_refusal, read_bounded
from tracker_core import hq as registry
from tracker_core import log_archive
from tracker_core import settings as settings_mod
from tracker_core.admin import (
    backfeed,
    census,
    checks,
    dead,
    hq,
    items,
    limits,
    log,
    projects,
    segments,
    tokens,
)
from tracker_core.admin import claims as claim_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput

COOKIE = "tracker_admin"
LOGIN_COOKIE = "tracker_login"  # the login form's CSRF nonce
LOGIN_NONCE_S = 3600
MAX_FORM_BYTES = 16 << 20
MAX_FORM_FIELDS = 300  # the dead page's checkboxes (a page of DEAD_SHOWN) and its other fields
GLOBAL_PATH = "-"  # /admin/-/...: never a project name (they start with a letter or digit)
# A paged action (release, move, requeue) from the page works through at most this many pages
# (MAX_PAGE each) or this many seconds, then offers to continue from where it stopped.
RELEASE_PAGES = 20
RELEASE_SECONDS = 2.0
WARRIORS_SHOWN = 50
LISTED = 100  # rows of a listing page (claims, dead, audit, log, shard map)
SAMPLE_DEFAULT = 20
QUEUES = ("todo", "backfeed", "secondary", "redo")  # the shared queues; downloader:NAME besides

# Widgets for the settings form (tracker_core.settings.SETTINGS holds what each one means).
FLAG_SETTINGS = frozenset({"paused", "ignore_global_blocked", "accept_queued_dones", "warrior_listed"})
CHOICE_SETTINGS = {"done_mode": ("keep", "discard", "offload")}
TEXTAREA_SETTINGS = frozenset({"description", "extra_parameters", "marker_html"})
SETTING_UNITS = {
    "rate_limit": "items/min",
    "rate_burst": "items",
    "max_claims_per_downloader": "claims",
    "max_multi": "items/request",
    "reclaim_ttl_s": "s",
    "claims_limit": "items",
    "max_reclaims": "reclaims",
    "offload_high": "items",
    "offload_low": "items",
    "offload_segment_items": "items",
    "backfeed_max_items": "items",
    "done_offload_high": "items",
    "log_maxlen": "entries",
    "max_bytes_per_item": "bytes",
}
SETTING_GROUPS = (
    (
        "Handing out",
        (
            "paused",
            "rate_limit",
            "rate_burst",
            "max_claims_per_downloader",
            "max_multi",
            "claims_limit",
            "min_version",
            "ignore_global_blocked",
            "accept_queued_dones",
            "extra_parameters",
        ),
    ),
    ("Reclaims", ("reclaim_ttl_s", "max_reclaims")),
    (
        "Storage",
        (
            "done_mode",
            "done_offload_high",
            "offload_high",
            "offload_low",
            "offload_segment_items",
            "backfeed_max_items",
            "log_maxlen",
            "max_bytes_per_item",
        ),
    ),
    (
        "Leaderboard and warrior HQ",
        (
            "title",
            "description",
            "warrior_listed",
            "repository",
            "logo",
            "marker_html",
            "lat_lng",
            "deadline",
            "host",
        ),
    ),
)

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("tracker_api", "templates/admin"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(ms) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(int(ms) / 1000))


def _entry_time(entry_id: str) -> str:
    """A stream entry's time (its id is MILLISECONDS-SEQ)."""
    ms = str(entry_id).partition("-")[0]
    return _when(ms) if ms.isdigit() else ""


TEMPLATES.filters["when"] = _when
TEMPLATES.filters["entry_time"] = _entry_time


def setting_groups() -> list[tuple[str, list[str]]]:
    """The settings form's sections; a setting no section names goes under "Other"."""
    named = {n for _, names in SETTING_GROUPS for n in names}
    rest = [n for n in settings_mod.SETTINGS if n not in named]
    return [(title, list(names)) for title, names in SETTING_GROUPS] + ([("Other", rest)] if rest else [])


def render(name: str, **context) -> str:
    """Template NAME rendered; names that were never UTF-8 (kept with surrogateescape) are shown
    with \\xNN escapes instead of failing the page."""
    page = TEMPLATES.get_template(name).render(**context)
    return page.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def csrf_for(token_text: str) -> str:
    return hmac.new(token_text.encode(), b"tracker admin csrf", hashlib.sha256).hexdigest()


class FormError:
    """A refusal shown in the form it came from (FORM: the action's name)."""

    def __init__(self, form: str, message: str):
        self.form, self.message = form, message


class Form(dict):
    """A posted form: the last value of each field; ``every(name)`` for repeated fields."""

    def __init__(self, pairs: list[tuple[str, str]]):
        super().__init__(pairs)
        self.pairs = pairs

    def every(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def text(self, name: str, default: str = "") -> str:
        return self.get(name, default).strip()


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


def _read_form(req, project) -> Form:
    """The posted form, URL-encoded or multipart (an uploaded file's text under its field)."""
    kind = (req.content_type or "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        raw = read_bounded(req, MAX_UPLOAD_BYTES, "admin_too_large", project)
        return _multipart(raw, req.content_type, project)
    raw = read_bounded(req, MAX_FORM_BYTES, "admin_too_large", project)
    try:
        pairs = urllib.parse.parse_qsl(
            raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
        )
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return Form(pairs)


def _multipart(raw: bytes, content_type: str, project) -> Form:
    pairs = []
    try:
        form = MultipartFormHandler().deserialize(io.BytesIO(raw), content_type, len(raw))
        for part in form:
            # A file's lines may be any bytes: one that is not UTF-8 is refused by the verb on
            # its own (counted), as the API's upload does.
            data = part.stream.read()
            pairs.append((part.name, data.decode("utf-8", "surrogateescape" if part.filename else "strict")))
            if len(pairs) > MAX_FORM_FIELDS:
                raise ValueError("too many fields")
    except (falcon.HTTPError, UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return Form(pairs)


class Session:
    """The logged-in browser: its token's text and record, and the CSRF field its forms carry."""

    def __init__(self, text: str, token):
        self.text, self.token = text, token
        self.csrf = csrf_for(text)

    def check_csrf(self, form: Form, project) -> None:
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            raise Refused(403, "bad or missing CSRF field: reload the page", "admin_bad_csrf", project)


class FormErrorPage:
    """Middleware: a refused form's answer is its page (set in req.context.admin_page) with the
    reason in the form, in place of errors.answer's bare page; status and count are unchanged."""

    def process_response(self, req, resp, resource, req_succeeded):
        page = getattr(req.context, "admin_page", None)
        if page is not None and not req_succeeded:
            resp.content_type = falcon.MEDIA_HTML
            resp.text = page


class Pages:
    """What every page resource shares: the context, the authenticator and the rendering."""

    def __init__(self, admin: AdminContext, segments_dir: Path):
        self.admin = admin
        self.auth = Authenticator(admin.conn)
        self.segments_dir = segments_dir

    def session(self, req, needs: str, project: str | None = None) -> Session:
        text = req.cookies.get(COOKIE, "")
        if not text:
            raise Refused(401, "log in at /admin first", "admin_unauthenticated")
        return Session(text, self.auth.check(text, needs, project))

    def posted(self, req, needs: str, project: str | None = None) -> tuple[Session, Form]:
        """Check token, Origin and CSRF of a form post, then read it."""
        session = self.session(req, needs, project)
        _check_origin(req, project)
        form = _read_form(req, project)
        session.check_csrf(form, project)
        return session, form

    def page(self, resp, template: str, session: Session | None, status=falcon.HTTP_200, **context):
        resp.status = status
        resp.content_type = falcon.MEDIA_HTML
        project = context.get("project")
        context.setdefault("base", f"/admin/{project}/" if project else f"/admin/{GLOBAL_PATH}/")
        for name in ("message", "error"):
            context.setdefault(name, None)
        context.setdefault("values", {})
        # A refusal's page is headed by its status, as errors.answer's bare page is.
        line = falcon.code_to_http_status(status)
        context["refused"] = line if int(line[:3]) >= 400 else None
        resp.text = render(
            template,
            session=session,
            csrf=session.csrf if session else "",
            is_global=bool(session and session.token.is_global),
            **context,
        )


def _paged(step, cursor: int) -> tuple[int, int]:
    """Run STEP(cursor) -> (count, next cursor) page after page until the cursor is 0 or the
    budget is spent; (total, cursor to continue from, 0 at the end). Each page is one verb call,
    audited on its own."""
    total, deadline = 0, time.monotonic() + RELEASE_SECONDS
    for _ in range(RELEASE_PAGES):
        count, cursor = step(cursor)
        total += count
        if cursor == 0 or time.monotonic() > deadline:
            break
    return total, cursor


def _cursor(form: Form) -> int:
    text = form.text("cursor", "0") or "0"
    if not DIGITS_RE.match(text):  # ASCII digits only: str.isdigit() takes "²", int() does not
        raise BadInput("cursor must be a number")
    return int(text)


def _int_param(req, name: str, default: int, high: int) -> int:
    text = req.get_param(name) or ""
    if not text:
        return default
    if not DIGITS_RE.match(text) or not 0 <= int(text) <= high:
        raise BadInput(f"{name!r} must be an integer from 0 to {high}")
    return int(text)


def _continued(message: str, cursor: int, action: str, fields: dict) -> tuple[str, dict]:
    """A paged action's answer: its message, and when it stopped at its budget, the query that
    makes the page offer to continue from CURSOR with the same FIELDS."""
    if not cursor:
        return message, {}
    return message + "; more left, continue below", {"continue": action, "cursor": cursor, **fields}


# -- /admin: login and the projects ------------------------------------------------------------


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
        names = [n for n in projects.list_projects(self.admin) if session.token.allows(n)]
        self.pages.page(
            resp,
            "index.html",
            session,
            status,
            title="Tracker admin",
            projects=names,
            online=registry.online_count(self.admin.conn),
            online_within_min=registry.ONLINE_WITHIN_MS // 60_000,
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
            resp.set_cookie(
                LOGIN_COOKIE,
                nonce,
                path="/admin",
                http_only=True,
                same_site="Strict",
                secure=req.scheme == "https",
                max_age=LOGIN_NONCE_S,
            )
        self.pages.page(
            resp, "login.html", None, status, title="Tracker admin: log in", nonce=nonce, error=error
        )

    def on_post(self, req, resp):
        _check_origin(req, None)
        form = _read_form(req, None)
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


# -- /admin/-/NAME: global pages ---------------------------------------------------------------


class GlobalPages:
    """Tokens, global blocks, the HQ document, the warrior registry, the audit log, logout."""

    VIEWS = frozenset({"tokens", "blocks", "hq", "warriors", "audit"})
    # action -> the view its form is on (logout and create-project live on the index).
    ACTIONS = {
        "logout": None,
        "create-project": None,
        "token-create": "tokens",
        "token-revoke": "tokens",
        "block": "blocks",
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
        context = dict(title=f"{name.capitalize()} · admin", view=name, message=message, error=error)
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
            "tokens": tokens.list_tokens(self.admin)["tokens"],
            "projects": projects.list_projects(self.admin),
        }

    def _blocks(self, req, session):
        return {"blocked": limits.blocks(self.admin)["global"]}

    def _hq(self, req, session):
        document = registry.document(self.admin.conn, "")
        current = {
            "auto_project": document["auto_project"] or "",
            "broadcast_message": document["broadcast_message"],
            "seesaw_version": document["warrior"]["seesaw_version"],
        }
        return {"current": current, "projects": projects.list_projects(self.admin)}

    def _warriors(self, req, session):
        offset = _int_param(req, "offset", 0, hq.MAX_OFFSET)
        if not session.token.is_global:  # project admins see how many, not who
            return {"registry": None, "offset": 0, "shown": WARRIORS_SHOWN, **self._online()}
        page = hq.warriors(self.admin, offset, WARRIORS_SHOWN)
        return {"registry": page, "offset": offset, "shown": WARRIORS_SHOWN, **self._online()}

    def _online(self):
        return {
            "online": registry.online_count(self.admin.conn),
            "online_within_min": registry.ONLINE_WITHIN_MS // 60_000,
        }

    def _audit(self, req, session):
        before = req.get_param("before") or None
        return {"audit": log.audit_page(self.admin, None, LISTED, before), "audit_project": None}

    def on_post(self, req, resp, name: str):
        if name not in self.ACTIONS:
            self.pages.session(req, ANY)
            raise Refused(404, f"no admin action {name[:80]!r}", "admin_bad_request")
        session, form = self.pages.posted(req, ANY if name == "logout" else GLOBAL)
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
        projects.create(ctx, name, {"title": title} if title else None)
        return f"project {name} created"

    def _do_token_create(self, ctx, form):
        made = tokens.create(ctx, form.text("scope"), form.text("note"))
        return {"message": f"token {made['token_id']} created", "created_token": made}

    def _do_token_revoke(self, ctx, form):
        return f"token {tokens.revoke(ctx, form.text('token_id'))['revoked']} revoked"

    def _do_block(self, ctx, form):
        remove = form.get("remove") == "1"
        entry = limits.block(ctx, form.text("entry"), None, remove)["entry"]
        return ("unblocked " if remove else "blocked ") + entry + " everywhere"

    def _do_hq(self, ctx, form):
        values = {n: form[n] for n in registry.HQ_FIELDS if n in form}
        hq.set_fields(ctx, values)
        return "HQ document saved: " + ", ".join(sorted(values))

    _do_hq_banner = _do_hq


# -- /admin/P and /admin/P/NAME: a project's pages ---------------------------------------------


class ProjectPages:
    """A project's pages (GET /admin/P/VIEW) and the actions of their forms (POST /admin/P/ACTION)."""

    VIEWS = ("overview", "settings", "queues", "claims", "dead", "backfeed", "segments", "audit", "log")
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
            shown = projects.show(self.admin, project)
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
        if not cursor or not DIGITS_RE.match(cursor):
            return None
        fields = {n: req.get_param(n) or "" for n in ProjectPages.PAGED[action]}
        return {"action": action, "fields": {**fields, "cursor": cursor}}

    def _queue_names(self, status) -> list[str]:
        owners = sorted(status["queues"].get("downloader", {}))
        return [*QUEUES, *(f"downloader:{o}" for o in owners)]

    def _overview(self, req, project):
        status = census.status(self.admin, project)
        return {"counts": status, "queues": QUEUES}

    def _settings(self, req, project):
        return {
            "groups": setting_groups(),
            "meaning": {n: spec[2] for n, spec in settings_mod.SETTINGS.items()},
            "flags": FLAG_SETTINGS,
            "choices": CHOICE_SETTINGS,
            "textareas": TEXTAREA_SETTINGS,
            "units": SETTING_UNITS,
            "limits": limits.list_limits(self.admin, project),
        }

    def _queues(self, req, project):
        status = census.status(self.admin, project)
        context = {"counts": status, "queue_names": self._queue_names(status), "sample": None}
        queue = req.get_param("sample")
        if queue:
            count = _int_param(req, "count", SAMPLE_DEFAULT, checks.MAX_SAMPLE)
            context["sample"] = {"queue": queue, "count": count}
            context["sample"]["items"] = items.sample(self.admin, project, queue, count or 1)["items"]
        return context

    def _claims(self, req, project):
        pattern = req.get_param("pattern") or "*"
        cursor = _int_param(req, "cursor", 0, checks.MAX_CURSOR)
        page = claim_verbs.list_claims(self.admin, project, cursor, LISTED, pattern)
        return {"claims": page, "pattern": pattern}

    def _dead(self, req, project):
        cursor = _int_param(req, "cursor", 0, checks.MAX_CURSOR)
        status = census.status(self.admin, project)
        page = dead.list_dead(self.admin, project, cursor, LISTED)
        return {"dead": page, "queue_names": self._queue_names(status), "dead_total": status["dead"]}

    def _backfeed(self, req, project):
        cursor = _int_param(req, "cursor", 0, checks.MAX_CURSOR)
        return {
            "secrets": backfeed.list_secrets(self.admin, project),
            "shards": backfeed.shard_map(self.admin, project, cursor, LISTED),
            "queue_names": QUEUES,
        }

    def _segments(self, req, project):
        return {"segments": segments.list_segments(self.admin, project)}

    def _audit(self, req, project):
        before = req.get_param("before") or None
        return {"audit": log.audit_page(self.admin, project, LISTED, before), "audit_project": project}

    def _log(self, req, project):
        query = {n: req.get_param(n) or None for n in ("kind", "since", "downloader", "cursor")}
        page = log.done_page(
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
        added = items.add(ctx, project, names, queue=form.text("queue") or "todo")
        return f"added {added['added']}, {added['duplicates']} already known"

    def _do_pause(self, ctx, project, form):
        projects.pause(ctx, project)
        return "paused: nothing is handed out"

    def _do_resume(self, ctx, project, form):
        projects.resume(ctx, project)
        return "resumed"

    def _do_delete(self, ctx, project, form):
        if form.text("confirm") != project:
            raise BadInput("type the project's name to confirm")
        projects.delete(ctx, project)
        return f"project {project} deleted"

    def _do_block(self, ctx, project, form):
        remove = form.get("remove") == "1"
        entry = limits.block(ctx, form.text("entry"), project, remove)["entry"]
        return ("unblocked " if remove else "blocked ") + entry

    def _do_settings(self, ctx, project, form):
        """Save the settings the form changed (all of them would bump the age for nothing)."""
        current = projects.show(ctx, project)["settings"]
        values = {k: form[k] for k in settings_mod.SETTINGS if k in form and form[k] != current.get(k)}
        if not values:
            return "no setting changed"
        age = projects.set_settings(ctx, project, values)["settings_age"]
        return f"settings saved: {', '.join(sorted(values))} (age {age})"

    def _do_limit_add(self, ctx, project, form):
        name = form.text("name")
        limits.add(ctx, project, name, form.text("pattern"), form.text("rate"))
        return f"limit {name} set"

    def _do_limit_remove(self, ctx, project, form):
        name = form.text("name")
        limits.remove(ctx, project, name)
        return f"limit {name} removed"

    def _do_reclassify(self, ctx, project, form):
        return f"{limits.reclassify(ctx, project)['held']} queued items now held by the limits"

    def _do_upload_target(self, ctx, project, form):
        done = projects.set_upload_target(ctx, project, form.text("url"), form.text("state") or "active")
        return f"upload target {done['url']} {done['state']}"

    def _do_move(self, ctx, project, form):
        source, target = form.text("source"), form.text("target")
        pattern = form.text("pattern") or "*"

        def step(cursor):
            page = items.move(ctx, project, source, target, pattern, cursor, checks.MAX_PAGE)
            return page["moved"], page["cursor"]

        moved, cursor = _paged(step, _cursor(form))
        fields = {"source": source, "target": target, "pattern": pattern}
        return _continued(f"moved {moved} from {source} to {target}", cursor, "move", fields)

    def _do_clear(self, ctx, project, form):
        queue = form.text("queue")
        if form.get("confirm") != "1":
            raise BadInput(f"tick the box to confirm clearing {queue}")
        return f"cleared {queue}: {items.clear(ctx, project, queue)['dropped']} dropped"

    def _do_redo(self, ctx, project, form):
        """Queue done (or seen) items again: the names typed, or done items matching a pattern
        page after page."""
        names = [n.strip() for n in form.get("items", "").splitlines() if n.strip()]
        pattern = form.text("pattern") or None
        queue = form.text("queue") or items.REDO_QUEUE
        offloaded = form.get("even_if_offloaded") == "1"
        if names and pattern:
            raise BadInput("give names or a pattern, not both")
        if names:
            done = items.redo_all(ctx, project, names=names, queue=queue, even_if_offloaded=offloaded)
            return f"requeued {done['requeued']} to {queue}, {done['skipped']} skipped"

        def step(cursor):
            page = items.redo(
                ctx,
                project,
                pattern=pattern,
                cursor=cursor,
                limit=checks.MAX_PAGE,
                queue=queue,
                even_if_offloaded=offloaded,
            )
            return page["requeued"], page["cursor"]

        requeued, cursor = _paged(step, _cursor(form))
        fields = {"pattern": pattern or "", "queue": queue, "even_if_offloaded": "1" if offloaded else ""}
        return _continued(f"requeued {requeued} to {queue}", cursor, "redo", fields)

    def _do_release(self, ctx, project, form):
        """Release a page of claims at a time until none is left, or the budget is spent."""
        downloader = form.text("downloader") or None
        pattern = form.text("pattern") or None
        age = form.text("older_than_s")
        try:
            older_than_s = float(age) if age else None
        except ValueError:
            raise BadInput("'older_than_s' must be a number of seconds") from None

        def step(cursor):
            page = claim_verbs.release(
                ctx,
                project,
                downloader=downloader,
                older_than_s=older_than_s,
                pattern=pattern,
                cursor=cursor,
                limit=checks.MAX_PAGE,
            )
            return page["released"], page["cursor"]

        released, cursor = _paged(step, _cursor(form))
        fields = {"downloader": downloader or "", "older_than_s": age, "pattern": pattern or ""}
        return _continued(f"released {released}", cursor, "release", fields)

    def _do_requeue(self, ctx, project, form):
        """Requeue the dead items ticked, or (all=1) every dead item page after page."""
        queue = form.text("queue") or "todo"
        if form.get("all") != "1":
            names = form.every("item")
            if not names:
                raise BadInput("tick the dead items to requeue, or requeue all")
            return f"requeued {dead.requeue(ctx, project, names, queue)['requeued']} to {queue}"

        def step(cursor):
            page = dead.requeue_page(ctx, project, cursor, checks.MAX_PAGE, queue)
            return page["requeued"], page["cursor"]

        requeued, cursor = _paged(step, _cursor(form))
        fields = {"queue": queue, "all": "1"}
        return _continued(f"requeued {requeued} to {queue}", cursor, "requeue", fields)

    def _do_secret_create(self, ctx, project, form):
        made = backfeed.create_secret(ctx, project)
        return {"message": f"backfeed secret {made['id']} created", "created_secret": made}

    def _do_secret_revoke(self, ctx, project, form):
        return f"backfeed secret {backfeed.revoke_secret(ctx, project, form.text('id'))['revoked']} revoked"

    def _do_shard_map(self, ctx, project, form):
        done = backfeed.map_shard(ctx, project, form.text("shard"), form.text("queue"))
        return f"backfeed shard {done['shard']} goes to {done['queue']}"

    def _do_shard_unmap(self, ctx, project, form):
        done = backfeed.unmap_shard(ctx, project, form.text("shard"))
        return f"backfeed shard {done['shard']} goes to {done['queue']}"


def add_admin_pages(app, admin: AdminContext, segments_dir: Path | None = None) -> None:
    """Route the admin pages; SEGMENTS_DIR is where `tracker maintain` archives the done log."""
    pages = Pages(admin, segments_dir or DEFAULT_SEGMENTS_DIR)
    index = AdminIndex(pages)
    project_pages = ProjectPages(pages)
    app.add_middleware(FormErrorPage())
    app.add_route("/admin", index)
    app.add_route(f"/admin/{GLOBAL_PATH}/{{name}}", GlobalPages(pages, index))
    app.add_route("/admin/{project}", project_pages)
    app.add_route("/admin/{project}/{name}", project_pages)
