"""The admin API under /api/admin/: token-authenticated, a thin adapter over the admin verbs.

Every route is declared once in ``ADMIN_ROUTES`` with what it needs: any valid token, a global
admin's, or one for the project in its path. The token is checked before the body is read.
A handler turns the request into a verb's arguments (tracker_core.admin: the contract table is
its docstring) and returns the verb's answer as JSON; the verb validates, acts and audits once,
with the token's id as the actor. Nothing here audits or changes Redis itself.

Input the verbs cannot see is checked by the handlers (admin_handlers.py) as they read it
(admin_request.py), as their declarations say (web.api_spec: the same declaration is their part
of GET /api/openapi.json); this module refuses query parameters a handler did not declare.
Every refusal is one error map (tracker_api.web.errors.admin_refusal: BadInput 400, NotFound
404, Conflict 409; Redis unreachable 503), answered as JSON ``{"error": "..."}`` and counted, never a 500.
"""

from __future__ import annotations

from pathlib import Path

import falcon
import orjson

from tracker_api.admin import api_handlers, webhook_handlers
from tracker_api.admin.api_request import Call
from tracker_api.web.api_spec import declared
from tracker_api.web.auth import ANY, GLOBAL, PROJECT, Authenticator
from tracker_api.web.config import AppConfig
from tracker_api.web.errors import admin_refusal
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput

DEFAULT_SEGMENTS_DIR = Path("var", "segments")
RESPONDER_REFUSES = (400, 401, 403)  # an unknown query parameter; no token, or not this one's


P = "/api/admin/projects/{project}"
ADMIN_ROUTES = [
    ("GET", "/api/admin/projects", ANY, api_handlers.list_projects),
    ("POST", "/api/admin/projects", GLOBAL, api_handlers.create_project),
    ("GET", P, PROJECT, api_handlers.show_project),
    ("DELETE", P, GLOBAL, api_handlers.delete_project),
    ("POST", P + "/shards", GLOBAL, api_handlers.grow_project),
    ("POST", P + "/settings", PROJECT, api_handlers.set_settings),
    ("POST", P + "/pause", PROJECT, api_handlers.pause),
    ("POST", P + "/resume", PROJECT, api_handlers.resume),
    ("GET", P + "/queues", PROJECT, api_handlers.queues),
    ("GET", P + "/queues/{queue}", PROJECT, api_handlers.count_queue),
    ("POST", P + "/queues/{queue}/items", PROJECT, api_handlers.add_items),
    ("GET", P + "/queues/{queue}/sample", PROJECT, api_handlers.sample),
    ("POST", P + "/queues/{queue}/clear", PROJECT, api_handlers.clear),
    ("POST", P + "/queues/{queue}/move", PROJECT, api_handlers.move),
    ("GET", P + "/claims", PROJECT, api_handlers.claims),
    ("POST", P + "/claims/release", PROJECT, api_handlers.release),
    ("POST", P + "/blocks", PROJECT, api_handlers.block),
    ("POST", P + "/upload-targets", PROJECT, api_handlers.upload_target),
    ("GET", P + "/limits", PROJECT, api_handlers.list_limits),
    ("POST", P + "/limits", PROJECT, api_handlers.add_limit),
    ("DELETE", P + "/limits/{name}", PROJECT, api_handlers.remove_limit),
    ("POST", P + "/reclassify", PROJECT, api_handlers.reclassify),
    ("GET", P + "/backfeed-secrets", PROJECT, api_handlers.list_backfeed_secrets),
    ("POST", P + "/backfeed-secrets", PROJECT, api_handlers.create_backfeed_secret),
    ("DELETE", P + "/backfeed-secrets/{secret_id}", PROJECT, api_handlers.revoke_backfeed_secret),
    ("GET", P + "/backfeed-shards", PROJECT, api_handlers.shard_map),
    ("POST", P + "/backfeed-shards/{shard}", PROJECT, api_handlers.map_shard),
    ("DELETE", P + "/backfeed-shards/{shard}", PROJECT, api_handlers.unmap_shard),
    ("GET", P + "/dead", PROJECT, api_handlers.list_dead),
    ("POST", P + "/dead/requeue", PROJECT, api_handlers.requeue_dead),
    ("GET", P + "/segments", PROJECT, api_handlers.list_segments),
    ("POST", P + "/redo", PROJECT, api_handlers.redo_items),
    ("GET", P + "/log", PROJECT, api_handlers.log_page),
    ("GET", P + "/item", PROJECT, api_handlers.item_story),
    ("GET", P + "/audit", PROJECT, api_handlers.project_audit),
    ("GET", P + "/webhooks", PROJECT, webhook_handlers.list_project),
    ("POST", P + "/webhooks", PROJECT, webhook_handlers.add_project),
    ("DELETE", P + "/webhooks/{hook_id}", PROJECT, webhook_handlers.remove_project),
    ("POST", "/api/admin/blocks", GLOBAL, api_handlers.block),
    ("GET", "/api/admin/audit", GLOBAL, api_handlers.global_audit),
    ("GET", "/api/admin/tokens", GLOBAL, api_handlers.list_tokens),
    ("POST", "/api/admin/tokens", GLOBAL, api_handlers.create_token),
    ("DELETE", "/api/admin/tokens/{token_id}", GLOBAL, api_handlers.revoke_token),
    ("GET", "/api/admin/warriors", GLOBAL, api_handlers.warriors),
    ("POST", "/api/admin/hq", GLOBAL, api_handlers.set_hq),
    ("GET", "/api/admin/webhooks", GLOBAL, webhook_handlers.list_global),
    ("POST", "/api/admin/webhooks", GLOBAL, webhook_handlers.add_global),
    ("DELETE", "/api/admin/webhooks/{hook_id}", GLOBAL, webhook_handlers.remove_global),
]


class AdminApi:
    def __init__(self, admin: AdminContext, config: AppConfig = AppConfig()):
        self.admin = admin
        self.auth = Authenticator(admin.conn)
        # Where `tracker maintain` archives the done log (the log route reads it); without one
        # configured, where `tracker run` keeps it by default.
        self.segments_dir = config.segments_dir or DEFAULT_SEGMENTS_DIR

    def responder(self, needs: str, handler):
        operation = declared(handler)
        accepted = frozenset(operation.query if operation else ())
        fields = operation.fields if operation else None

        def respond(resource, req, resp, **params):
            token = self.auth.require(req, needs, params.get("project"))
            call = Call(req, params, token, self.admin.as_actor(token.token_id), self.segments_dir)
            call.fields = fields
            try:
                unknown = sorted(set(req.params) - accepted)
                if unknown:
                    known = ", ".join(sorted(accepted)) or "none"
                    raise BadInput(f"unknown query parameter {unknown[0][:80]!r} (known: {known})")
                answer = handler(call)
            except AdminError as exc:
                raise admin_refusal(exc, call.project) from None
            resp.content_type = falcon.MEDIA_JSON
            resp.data = dumps(answer)

        # What the API's description reads (tracker_api.web.openapi): the token needed, the
        # handler's declaration, and what this responder refuses before the handler runs.
        respond.needs, respond.api, respond.refuses = needs, operation, RESPONDER_REFUSES  # type: ignore[attr-defined]
        return respond


def _printable(value):
    """VALUE with every name that is not UTF-8 shown with \\xNN escapes for its bad bytes."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_printable(v) for v in value]
    return value


def dumps(answer) -> bytes:
    """Encode an admin answer. Names queued before names had to be UTF-8 are read with
    surrogateescape and would make orjson fail (a 500): they are listed with their bad bytes
    escaped instead, so a listing (dead items, samples, claims) always answers."""
    try:
        return orjson.dumps(answer)
    except TypeError:
        return orjson.dumps(_printable(answer))


class _Route:
    """One path of the admin API; its responders are set per method from ADMIN_ROUTES."""


def add_admin_routes(app, admin: AdminContext, config: AppConfig = AppConfig()) -> None:
    api = AdminApi(admin, config)
    routes: dict[str, _Route] = {}
    for method, path, needs, handler in ADMIN_ROUTES:
        route = routes.setdefault(path, _Route())
        responder = api.responder(needs, handler)
        setattr(route, "on_" + method.lower(), responder.__get__(route))
    for path, route in routes.items():
        app.add_route(path, route)
