"""What every admin page shares: the Jinja2 templates (autoescaped), the logged-in session and
its checks, rendering, and the page a refused form answers with (FormErrorPage)."""

from __future__ import annotations

import time
from pathlib import Path

import falcon
import jinja2

from tracker_api.admin.pages.forms import COOKIE, Form, Session, check_origin, read_form
from tracker_api.web.auth import Authenticator
from tracker_api.web.errors import Refused
from tracker_core.admin.context import AdminContext

GLOBAL_PATH = "-"  # /admin/-/...: never a project name (they start with a letter or digit)
LISTED = 100  # rows of a listing page (claims, dead, audit, log, shard map)


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


def render(name: str, **context) -> str:
    """Template NAME rendered; names that were never UTF-8 (kept with surrogateescape) are shown
    with \\xNN escapes instead of failing the page."""
    page = TEMPLATES.get_template(name).render(**context)
    return page.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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

    def session(self, req, needs: str, project: str | None = None, writes: bool = False) -> Session:
        text = req.cookies.get(COOKIE, "")
        if not text:
            raise Refused(401, "log in at /admin first", "admin_unauthenticated")
        return Session(text, self.auth.check(text, needs, project, writes))

    def posted(
        self, req, needs: str, project: str | None = None, writes: bool = True
    ) -> tuple[Session, Form]:
        """Check token, Origin and CSRF of a form post, then read it. A post that WRITES (every
        one but logout) refuses a read-only token."""
        session = self.session(req, needs, project, writes)
        check_origin(req, project)
        form = read_form(req, project)
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
