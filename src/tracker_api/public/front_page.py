"""The front page GET /: the projects listed for warriors, their progress, and the HQ banner.

Rendered here as plain HTML (no script: it works under the pages' CSP and without JavaScript),
built at most once a second per process so a crowd costs Redis one pass a second per worker.
Projects are those of projects.json (warrior_listed), with the same leaderboard links; an
unlisted project never appears. Titles and descriptions are escaped (a project admin sets
them); the banner, ``tracker_banner_html`` of the HQ document, is HTML only a global admin can
set, shown kept to tracker_core.project.safe_html's allowlist (cleaned when set, and here again for a
value stored before that rule); the CSP would still keep scripts and other hosts' images out.
"""

from __future__ import annotations

import html
import time

import falcon

from tracker_api.public.stats_page import STATIC_DIR
from tracker_core import keyspace
from tracker_core.figures import census
from tracker_core.items.engine import Engine
from tracker_core.project import safe_html
from tracker_core.warriors import hq


def _number(n: int) -> str:
    return f"{n:,}".replace(",", "\u202f")  # a narrow no-break space: 1 234 567


def project_row(entry: dict, counts: dict) -> str:
    # As stats.json counts them (census.todo_total: offloaded items included).
    done, out, to_do = counts["done"], counts["out"], census.todo_total(counts)
    total = done + out + to_do
    share = f"{100 * done / total:.1f} %" if total else "–"
    title = html.escape(entry.get("title") or entry["name"])
    # A path, not projects.json's absolute URL: right behind any proxy or host name.
    link = html.escape(f"/{entry['name']}/", quote=True)
    description = entry.get("description")
    about = f'<p class="about">{html.escape(description)}</p>' if description else ""
    return (
        f'<li class="project"><h2><a href="{link}">{title}</a></h2>{about}'
        f'<progress value="{done}" max="{max(total, 1)}">{share}</progress>'
        f'<p class="counts"><span><b>{_number(done)}</b> done</span> '
        f"<span><b>{_number(out)}</b> out</span> "
        f'<span><b>{_number(to_do)}</b> to do</span> <span class="share">{share}</span></p>'
        f'<p class="links"><a href="{link}">leaderboard</a></p></li>'
    )


class FrontPage:
    def __init__(self, engine: Engine, conn, clock=time.monotonic):
        """CONN: a redis-py client (the admin context's) for the HQ document and banner."""
        self.engine = engine
        self.conn = conn
        self.clock = clock
        self.template = (STATIC_DIR / "front.html").read_text()
        self.cached: tuple[int, str] | None = None

    def render(self) -> str:
        document = hq.document(self.conn, "")
        banner = safe_html.clean(self.conn.hget(keyspace.HQ, "tracker_banner_html") or "")
        rows = [project_row(entry, self.engine.counts(entry["name"])) for entry in document["projects"]]
        projects = "".join(rows) if rows else '<li class="empty">No project is listed right now.</li>'
        return self.template.replace(
            "{{banner}}", f'<div class="banner">{banner}</div>' if banner else ""
        ).replace("{{projects}}", projects)

    def on_get(self, req, resp):
        second = int(self.clock())
        if self.cached is None or self.cached[0] != second:
            self.cached = (second, self.render())
        resp.content_type = falcon.MEDIA_HTML
        resp.text = self.cached[1]
