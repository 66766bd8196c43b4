"""The public leaderboard page GET /P/ and the files it loads from GET /static/NAME.

The page is static HTML with the project's name filled in; its numbers come from stats.json and
the live feed. Its scripts and styles (uPlot vendored from its npm package, with its licence) are
served from the package itself, so the page loads nothing from other hosts.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import falcon

from tracker_api.web.errors import Refused
from tracker_core.items.engine import Engine
from tracker_core.project.project_links import origin, public_links

STATIC_DIR = Path(__file__).parent.parent / "static"
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def _load_static() -> dict[str, tuple[bytes, str]]:
    """Read the shipped files once: NAME -> (content, type). Only these names are ever served."""
    files = {}
    for path in STATIC_DIR.iterdir():
        kind = CONTENT_TYPES.get(path.suffix)
        if path.is_file() and kind:
            files[path.name] = (path.read_bytes(), kind)
    return files


class StaticResource:
    def __init__(self):
        self.files = _load_static()

    def on_get(self, req, resp, name: str):
        found = self.files.get(name)
        if found is None:
            raise Refused(404, "no such file", "bad_static_name")
        resp.data, resp.content_type = found
        resp.cache_control = ["public", "max-age=3600"]


class LeaderboardPage:
    def __init__(self, engine: Engine, live_url: str = ""):
        """LIVE_URL: where the page opens the live feed (AppConfig.live_url; empty: the page's
        own host, the next port up)."""
        self.engine = engine
        self.template = (STATIC_DIR / "leaderboard.html").read_text()
        self.live_url = live_url

    def on_get(self, req, resp, project: str):
        settings = self.engine.settings(project)
        if settings is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        values = settings.values
        links = public_links(values)
        fill = {
            name: html.escape(value)
            for name, value in (
                ("project", project),
                ("title", values.get("title") or project),
                ("live_url", self.live_url),
            )
        }
        fill["logo"] = _logo(links["logo_url"])
        fill["about"] = _about(values.get("description", ""), links["repository_url"])
        if links["logo_url"]:
            resp.context.img_origin = origin(links["logo_url"])  # the page's CSP admits it
        resp.content_type = falcon.MEDIA_HTML
        # One pass: a value that reads "{{about}}" stays text, never a second placeholder.
        resp.text = PLACEHOLDER_RE.sub(lambda m: fill.get(m[1], ""), self.template)


PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")


def _logo(url: str) -> str:
    """The project's logo (an http(s) URL already checked by project_links), or nothing."""
    if not url:
        return ""
    return f'<img class="logo" src="{html.escape(url)}" alt="" referrerpolicy="no-referrer">'


def _about(description: str, repository_url: str) -> str:
    """The description (text, escaped: a project admin writes it) and the repository link."""
    parts = []
    if description:
        parts.append(f'<p class="about" id="about">{html.escape(description)}</p>')
    if repository_url:
        link = html.escape(repository_url)
        parts.append(
            f'<p class="repo">Repository: <a id="repository" href="{link}" '
            f'rel="noopener noreferrer nofollow">{link}</a></p>'
        )
    return "".join(parts)
