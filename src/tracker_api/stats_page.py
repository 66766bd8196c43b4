"""The public leaderboard page GET /P/ and the files it loads from GET /static/NAME.

The page is static HTML with the project's name filled in; its numbers come from stats.json and
the live feed. Its scripts and styles (uPlot vendored from its npm package, with its licence) are
served from the package itself, so the page loads nothing from other hosts.
"""

from __future__ import annotations

import html
from pathlib import Path

import falcon

from tracker_api.errors import Refused
from tracker_core.engine import Engine

STATIC_DIR = Path(__file__).with_name("static")
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
        fill = {
            "project": project,
            "title": settings.values.get("title") or project,
            "live_url": self.live_url,
        }
        page = self.template
        for name, value in fill.items():
            page = page.replace("{{" + name + "}}", html.escape(value))
        resp.content_type = falcon.MEDIA_HTML
        resp.text = page
