"""Refusals with a one-line reason: every bad request is answered 4xx, counted, and changes nothing."""

from __future__ import annotations

import html
import logging

import falcon
import orjson

from tracker_core.admin.errors import AdminError, Conflict, NotFound
from tracker_core.infra.rawredis import RedisError

LOG = logging.getLogger("tracker.server")


class Refused(Exception):
    """Answer STATUS with the one-line REASON as text, and count it under FIELD."""

    def __init__(self, status: int, reason: str, field: str, project: str | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.field = field
        self.project = project


ADMIN_API_PREFIX = "/api/admin/"
MAX_REASON_CHARS = 300

# The admin faces' one error map (API and pages alike): a verb's typed refusal -> HTTP status
# and the counter it is counted under. The type decides, never the message's text. A base
# AdminError (no subtype) is bad input. Redis unreachable is not here: redis-py's errors reach
# storage_handler (503) from any path.
ADMIN_ERROR_STATUS = (
    (NotFound, 404, "admin_bad_request"),
    (Conflict, 409, "admin_conflict"),
    (AdminError, 400, "admin_bad_request"),
)


def admin_refusal(exc: AdminError, project: str | None) -> Refused:
    """The refusal a verb's typed error becomes: its status, its first line, its counter."""
    status, field = next((s, f) for kind, s, f in ADMIN_ERROR_STATUS if isinstance(exc, kind))
    reason = (str(exc).splitlines() or ["bad request"])[0][:MAX_REASON_CHARS]
    return Refused(status, reason, field, project)


def read_bounded(req, limit: int, field: str, project: str | None = None) -> bytes:
    """The request's body, refused with a 413 (counted under FIELD) past LIMIT bytes."""
    if req.content_length is not None and req.content_length > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", field, project)
    raw = req.bounded_stream.read(limit + 1)
    if len(raw) > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", field, project)
    return raw


def answer(req, resp, status: int, reason: str) -> None:
    """Answer STATUS with REASON in the shape the path's clients read.

    Grab scripts decode every backfeed answer as JSON and read its status_code (a text answer
    raises in the script instead of being retried); admin API clients read JSON ``{"error":
    REASON}`` (one line, ended by a newline as the text answers are); the admin pages show it
    in a page a browser renders; warriors read the protocol's plain text.
    """
    resp.status = status
    shape = refusal_shape(req.path)
    if shape == "backfeed":
        resp.media = {"status_code": status, "reason": reason}
    elif shape == "admin_api":
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"error": reason}) + b"\n"
    elif shape == "admin_page":
        resp.content_type = falcon.MEDIA_HTML
        resp.text = _error_page(status, reason)
    else:
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = reason + "\n"


def refusal_shape(path: str) -> str:
    """Which shape ``answer`` gives a refusal on PATH: backfeed, admin_api, admin_page or text."""
    if path.startswith("/backfeed/"):
        return "backfeed"
    if path.startswith(ADMIN_API_PREFIX):
        return "admin_api"
    if path == "/admin" or path.startswith("/admin/"):
        return "admin_page"
    return "text"


# What a refusal's body is in each shape, for the API description (tracker_api.web.openapi).
REFUSAL_SCHEMAS = {
    "backfeed": (
        falcon.MEDIA_JSON,
        {
            "type": "object",
            "properties": {"status_code": {"type": "integer"}, "reason": {"type": "string"}},
            "required": ["status_code", "reason"],
        },
    ),
    "admin_api": (
        falcon.MEDIA_JSON,
        {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
    ),
    "admin_page": (falcon.MEDIA_HTML, {"type": "string"}),
    "text": ("text/plain", {"type": "string"}),
}


def _error_page(status: int, reason: str) -> str:
    """The admin pages' refusal: the reason in a page of the admin's style, one line of HTML."""
    title = f"{status} {falcon.code_to_http_status(status)[4:]}"
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
        "<link rel=stylesheet href=/static/admin.css></head><body>"
        f"<h1>{html.escape(title)}</h1><p class=error>{html.escape(reason)}</p>"
        '<p><a href="/admin">Back to the admin pages</a></p></body></html>\n'
    )


def count_refusal(engine, project: str | None, field: str) -> None:
    """Count a refusal under FIELD in PROJECT's stats, or globally when no such project exists."""
    try:
        # Only a project that exists gets the count; anything else would create its keys.
        known = project is not None and engine.settings(project) is not None
        engine.count(project if known else None, field)
    except RedisError:
        pass  # counting must never turn a 4xx into a 5xx


def refuse_handler(engine):
    def handle(req, resp, ex: Refused, params):
        answer(req, resp, ex.status, ex.reason)
        count_refusal(engine, ex.project, ex.field)

    return handle


def storage_handler(req, resp, ex: RedisError, params):
    """Redis unreachable or the connection broke mid-call (rawredis.ConnectionLost,
    OutcomeUnknown; failover.NotAcknowledged): 503, so clients retry; nothing was acknowledged.

    A change whose outcome is unknown may have been made: the retry is safe because every
    warrior call is (done is idempotent; a claim whose answer was lost stays out and is
    reclaimed), and a warrior retries on any non-200."""
    answer(req, resp, 503, "tracker storage unavailable, retry later")


def clock_handler(req, resp, ex: Exception, params):
    """This node's clock is further off Redis's than --max-clock-offset allows
    (tracker_core.infra.redis_clock): 503 with the reason, so the load balancer's /healthz check takes
    the node out and clients retry on another; nothing was changed."""
    resp.set_header("Retry-After", "60")
    answer(req, resp, 503, f"this tracker node cannot serve: {ex}")


def script_handler(req, resp, ex: Exception, params):
    """A script refused by Redis (out of memory under noeviction, busy, loading...): 503.

    A warrior retries any non-200 after its back-off; a 500 would say the request was wrong.
    The reason goes to the log, not to the client.
    """
    # The logging setup redacts every record (a backfeed path carries its secret).
    LOG.error("%s %s: %s", req.method, req.path, ex)
    answer(req, resp, 503, "tracker storage refused the change, retry later")


def unrouted_handler(engine):
    """No route for the path (404) or no such method on it (405): one line, counted globally.

    Backfeed clients read a JSON `status_code`, so under /backfeed/ the answer is JSON as the
    endpoint's own refusals are; everything else gets the protocol's one-line text.
    """

    def handle(req, resp, ex, params):
        method_not_allowed = isinstance(ex, falcon.HTTPMethodNotAllowed)
        status = 405 if method_not_allowed else 404
        reason = (
            f"{req.method} is not allowed on {req.path}" if method_not_allowed else f"no such path {req.path}"
        )[:300]
        resp.status = status
        for name, value in (ex.headers or {}).items():  # Allow: on a 405
            resp.set_header(name, value)
        answer(req, resp, status, reason)
        try:
            engine.count(None, "bad_method" if method_not_allowed else "bad_path")
        except RedisError:
            pass  # counting must never turn a 4xx into a 5xx

    return handle
