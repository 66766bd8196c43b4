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
error map (tracker_api.web.errors.admin_refusal: status and counter); its answer is the page the
form was on, with the reason beside the form and what was entered kept (FormErrorPage).
"""

from __future__ import annotations

from pathlib import Path

from tracker_api.admin.api_routes import DEFAULT_SEGMENTS_DIR
from tracker_api.admin.pages.base import GLOBAL_PATH, FormErrorPage, Pages
from tracker_api.admin.pages.forms import csrf_for
from tracker_api.admin.pages.global_pages import GlobalPages
from tracker_api.admin.pages.index_page import AdminIndex
from tracker_api.admin.pages.project_pages import ProjectPages
from tracker_core.admin.context import AdminContext

__all__ = ["add_admin_pages", "csrf_for"]


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
