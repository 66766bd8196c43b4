"""Response headers that keep browsers from misusing what the tracker serves.

- ``X-Content-Type-Options: nosniff`` on every answer: a browser never runs a JSON or text
  answer (which may echo an item name) as a script or a page.
- HTML pages (leaderboard, admin) may not be framed (``X-Frame-Options: DENY`` and CSP
  ``frame-ancestors 'none'``: no clickjacking of the admin forms) and run only the scripts and
  styles under /static/ (no inline script, nothing from other hosts). The leaderboard's feed
  may be on another port or host (TRACKER_LIVE_URL), hence ``connect-src ws: wss:``.
  Warriors' answers are not HTML and skip these, so the hot path sends no extra bytes.
- Admin pages and the admin API: ``Cache-Control: no-store``, so no proxy or browser cache
  keeps a page with tokens' effects, CSRF fields or the registry.
"""

from __future__ import annotations

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
ADMIN_PREFIXES = ("/admin/", "/api/admin/")


def content_security_policy(resp) -> str:
    """The policy; a leaderboard with a logo elsewhere (project_links.origin, a checked
    scheme://host[:port]) may load images from that one origin too (resp.context.img_origin)."""
    origin = getattr(resp.context, "img_origin", None)
    if not origin:
        return CONTENT_SECURITY_POLICY
    return CONTENT_SECURITY_POLICY.replace("img-src 'self' data:;", f"img-src 'self' data: {origin};")


def is_admin_path(path: str) -> bool:
    return path in ("/admin", "/api/admin") or path.startswith(ADMIN_PREFIXES)


class SecurityHeaders:
    """Falcon middleware: add the headers above to every response, errors included."""

    def process_response(self, req, resp, resource, req_succeeded):
        resp.set_header("X-Content-Type-Options", "nosniff")
        if (resp.content_type or "").startswith("text/html"):
            resp.set_header("X-Frame-Options", "DENY")
            resp.set_header("Content-Security-Policy", content_security_policy(resp))
        if is_admin_path(req.path):
            resp.set_header("Cache-Control", "no-store")
