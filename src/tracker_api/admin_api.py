"""The admin API under /api/admin/ (token-authenticated, audited) and the warrior HQ endpoints.

Every admin route is declared once in ``ADMIN_ROUTES`` with what it needs: any valid token, a
global admin's, or one for the project in its path. The token is checked before the body is
read; every change is written to the audit log with the token's id. The operations themselves
are the ones the CLI runs (tracker_core.admin, operations, tokens, hq).
"""
from __future__ import annotations

import falcon
import orjson

from tracker_api.auth import ANY, GLOBAL, PROJECT, Authenticator
from tracker_api.errors import Refused
from tracker_core import audit, hq, operations, tokens
from tracker_core.admin import Admin, AdminError

MAX_JSON_BYTES = 1 << 20
MAX_UPLOAD_BYTES = 64 << 20     # an item list uploaded as text, one name per line
ADD_BATCH = 5000


class Call:
    """What a handler gets: the request, the path parameters, the caller's token, helpers."""

    def __init__(self, api: "AdminApi", req, params: dict, token):
        self.api, self.req, self.params, self.token = api, req, params, token
        self.admin: Admin = api.admin
        self.project = params.get("project")

    def body(self) -> dict:
        raw = _read(self.req, MAX_JSON_BYTES, self.project)
        if not raw.strip():
            return {}
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise Refused(400, "body is not valid JSON", "admin_bad_json", self.project) from None
        if type(body) is not dict:
            raise Refused(400, "body must be a JSON object", "admin_bad_json", self.project)
        return body

    def int_param(self, name: str, default: int, low: int = 0, high: int = 1 << 62) -> int:
        return self.req.get_param_as_int(name, min_value=low, max_value=high, default=default)

    def audit(self, action: str, **detail) -> None:
        audit.record(self.admin.r, self.token.token_id, action, self.project, **detail)


def _read(req, limit: int, project) -> bytes:
    if req.content_length is not None and req.content_length > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", "admin_too_large", project)
    raw = req.bounded_stream.read(limit + 1)
    if len(raw) > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", "admin_too_large", project)
    return raw


def _text(body: dict, name: str, required: bool = True, default: str = "") -> str:
    value = body.get(name, None)
    if value is None:
        if required:
            raise AdminError(f"missing {name!r}")
        return default
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise AdminError(f"{name!r} must be a string")
    return str(value)


# -- handlers: (call) -> JSON-ready answer ------------------------------------------------------

def list_projects(c: Call):
    names = c.admin.projects()
    if not c.token.is_global:
        names = [n for n in names if c.token.allows(n)]
    return {"projects": names}


def create_project(c: Call):
    body = c.body()
    name = _text(body, "project")
    values = body.get("settings") or {}
    if not isinstance(values, dict):
        raise AdminError("'settings' must be an object")
    c.project = name
    if not c.admin.create_project(name, **{k: str(v) for k, v in values.items()}):
        raise Refused(409, f"project {name!r} already exists", "admin_conflict")
    c.audit("project.create", settings=values)
    return {"created": name}


def show_project(c: Call):
    return c.admin.show_project(c.project)


def delete_project(c: Call):
    operations.delete_project(c.admin, c.project)
    c.audit("project.delete")
    return {"deleted": c.project}


def set_settings(c: Call):
    values = {k: str(v) for k, v in c.body().items()}
    if not values:
        raise AdminError("no settings given")
    age = c.admin.set_settings(c.project, values)
    c.audit("project.settings", settings=values)
    return {"settings_age": age}


def pause(c: Call):
    age = operations.pause(c.admin, c.project, True)
    c.audit("project.pause")
    return {"settings_age": age, "paused": True}


def resume(c: Call):
    age = operations.pause(c.admin, c.project, False)
    c.audit("project.resume")
    return {"settings_age": age, "paused": False}


def queues(c: Call):
    return c.admin.status(c.project)


def _upload_names(c: Call):
    kind = (c.req.content_type or "").split(";")[0].strip().lower()
    if kind == "application/json":
        names = c.body().get("items")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise AdminError("'items' must be a list of strings")
        return names
    raw = _read(c.req, MAX_UPLOAD_BYTES, c.project)
    return raw.decode("utf-8", "surrogateescape").splitlines()


def add_items(c: Call):
    queue = c.params["queue"]
    names = [n for n in _upload_names(c) if n]
    added = duplicates = 0
    for a, d in c.admin.add_items(c.project, names, queue=queue, batch=ADD_BATCH):
        added += a
        duplicates += d
    c.audit("items.add", queue=queue, added=added, duplicates=duplicates)
    return {"added": added, "duplicates": duplicates}


def count_queue(c: Call):
    return {"queue": c.params["queue"], "count": operations.count(c.admin, c.project, c.params["queue"])}


def sample(c: Call):
    count = c.int_param("count", 20, 1, operations.MAX_SAMPLE)
    return {"items": operations.sample(c.admin, c.project, c.params["queue"], count)}


def clear(c: Call):
    dropped = operations.clear(c.admin, c.project, c.params["queue"])
    c.audit("queue.clear", queue=c.params["queue"], dropped=dropped)
    return {"dropped": dropped}


def move(c: Call):
    body = c.body()
    result = operations.move(c.admin, c.project, c.params["queue"], _text(body, "to"),
                             pattern=_text(body, "pattern", False, "*"),
                             cursor=int(_text(body, "cursor", False, "0")),
                             limit=int(_text(body, "limit", False, "1000")))
    c.audit("queue.move", source=c.params["queue"], target=body["to"],
            pattern=body.get("pattern", "*"), moved=result["moved"])
    return result


def claims(c: Call):
    return operations.list_claims(c.admin, c.project, cursor=c.int_param("cursor", 0),
                                  count=c.int_param("count", 100, 1, operations.MAX_PAGE),
                                  pattern=c.req.get_param("pattern") or "*")


def release(c: Call):
    body = c.body()
    age = body.get("older_than_s")
    if age is not None and (isinstance(age, bool) or not isinstance(age, (int, float)) or age < 0):
        raise AdminError("'older_than_s' must be a number of seconds")
    result = operations.release(
        c.admin, c.project, downloader=body.get("downloader"), older_than_s=age,
        pattern=body.get("pattern"), cursor=int(_text(body, "cursor", False, "0")),
        limit=int(_text(body, "limit", False, "1000")))
    c.audit("claims.release", filter={k: body[k] for k in ("downloader", "older_than_s", "pattern")
                                      if k in body}, released=result["released"])
    return result


def block(c: Call):
    body = c.body()
    entry, remove = _text(body, "entry"), bool(body.get("remove"))
    c.admin.block(entry, c.project, remove)
    c.audit("block.remove" if remove else "block.add", entry=entry)
    return {"entry": entry, "blocked": not remove}


def upload_target(c: Call):
    body = c.body()
    url, state = _text(body, "url"), _text(body, "state", False, "active")
    if state == "remove":
        state = ""
    c.admin.set_upload_target(c.project, url, state)
    c.audit("upload_target", url=url, state=state or "removed")
    return {"url": url, "state": state or "removed"}


def project_audit(c: Call):
    return audit.read(c.admin.r, c.project, c.int_param("count", 100, 1, audit.MAX_PAGE),
                      c.req.get_param("before"))


def global_audit(c: Call):
    return audit.read(c.admin.r, None, c.int_param("count", 100, 1, audit.MAX_PAGE),
                      c.req.get_param("before"))


def list_tokens(c: Call):
    return {"tokens": [t.__dict__ for t in tokens.list_tokens(c.admin.r)]}


def create_token(c: Call):
    body = c.body()
    scope = _text(body, "scope")
    text, record = tokens.create(c.admin.r, scope, _text(body, "note", False))
    c.project = None if record.is_global else scope
    c.audit("token.create", token_id=record.token_id, scope=scope)
    return {"token": text, "token_id": record.token_id, "scope": scope}


def revoke_token(c: Call):
    token_id = c.params["token_id"]
    if not tokens.revoke(c.admin.r, token_id):
        raise Refused(404, f"no token {token_id!r}", "admin_unknown_token")
    c.audit("token.revoke", token_id=token_id)
    return {"revoked": token_id}


def warriors(c: Call):
    return {"active_last_hour": hq.active_count(c.admin.r),
            "warriors": hq.list_warriors(c.admin.r, c.int_param("offset", 0),
                                         c.int_param("count", 100, 1, 1000))}


def set_hq(c: Call):
    values = {k: str(v) for k, v in c.body().items()}
    hq.set_fields(c.admin.r, values)
    c.audit("hq.set", fields=values)
    return {"hq": values}


P = "/api/admin/projects/{project}"
ADMIN_ROUTES = [
    ("GET", "/api/admin/projects", ANY, list_projects),
    ("POST", "/api/admin/projects", GLOBAL, create_project),
    ("GET", P, PROJECT, show_project),
    ("DELETE", P, GLOBAL, delete_project),
    ("POST", P + "/settings", PROJECT, set_settings),
    ("POST", P + "/pause", PROJECT, pause),
    ("POST", P + "/resume", PROJECT, resume),
    ("GET", P + "/queues", PROJECT, queues),
    ("GET", P + "/queues/{queue}", PROJECT, count_queue),
    ("POST", P + "/queues/{queue}/items", PROJECT, add_items),
    ("GET", P + "/queues/{queue}/sample", PROJECT, sample),
    ("POST", P + "/queues/{queue}/clear", PROJECT, clear),
    ("POST", P + "/queues/{queue}/move", PROJECT, move),
    ("GET", P + "/claims", PROJECT, claims),
    ("POST", P + "/claims/release", PROJECT, release),
    ("POST", P + "/blocks", PROJECT, block),
    ("POST", P + "/upload-targets", PROJECT, upload_target),
    ("GET", P + "/audit", PROJECT, project_audit),
    ("POST", "/api/admin/blocks", GLOBAL, block),
    ("GET", "/api/admin/audit", GLOBAL, global_audit),
    ("GET", "/api/admin/tokens", GLOBAL, list_tokens),
    ("POST", "/api/admin/tokens", GLOBAL, create_token),
    ("DELETE", "/api/admin/tokens/{token_id}", GLOBAL, revoke_token),
    ("GET", "/api/admin/warriors", GLOBAL, warriors),
    ("POST", "/api/admin/hq", GLOBAL, set_hq),
]


class AdminApi:
    def __init__(self, admin: Admin):
        self.admin = admin
        self.auth = Authenticator(admin.r)

    def responder(self, needs: str, handler):
        def respond(resource, req, resp, **params):
            token = self.auth.require(req, needs, params.get("project"))
            call = Call(self, req, params, token)
            try:
                answer = handler(call)
            except (AdminError, tokens.TokenError, ValueError) as exc:
                text = str(exc).splitlines()[0] if str(exc) else "bad request"
                status = 404 if text.startswith("unknown project") else 400
                raise Refused(status, text, "admin_bad_request", call.project) from None
            resp.content_type = falcon.MEDIA_JSON
            resp.data = orjson.dumps(answer)
        return respond


class _Route:
    """One path of the admin API; its responders are set per method from ADMIN_ROUTES."""


def add_admin_routes(app, admin: Admin) -> None:
    api = AdminApi(admin)
    routes: dict[str, _Route] = {}
    for method, path, needs, handler in ADMIN_ROUTES:
        route = routes.setdefault(path, _Route())
        responder = api.responder(needs, handler)
        setattr(route, "on_" + method.lower(), responder.__get__(route))
    for path, route in routes.items():
        app.add_route(path, route)


# -- the warrior HQ (public) --------------------------------------------------------------------

class ProjectsDocument:
    def __init__(self, admin: Admin):
        self.admin = admin

    def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(hq.document(self.admin.r, req.prefix))


def _warrior_body(req) -> dict:
    raw = _read(req, 64 << 10, None)
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise Refused(400, "body is not valid JSON", "bad_json") from None
    if type(body) is not dict:
        raise Refused(400, "body must be a JSON object", "bad_json")
    return body


class RegisterWarrior:
    def __init__(self, admin: Admin, trust_forwarded: bool = False):
        self.admin = admin
        self.trust_forwarded = trust_forwarded

    def on_post(self, req, resp):
        body = _warrior_body(req)
        warrior = body.get("warrior", {})
        if not isinstance(warrior, dict):
            raise Refused(400, "'warrior' must be an object", "bad_warrior")
        ip = (req.access_route[0] if self.trust_forwarded and req.access_route
              else req.remote_addr or "")
        try:
            warrior_id = hq.register(self.admin.r, warrior, ip)
        except ValueError as exc:
            raise Refused(400, str(exc), "bad_warrior") from None
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"warrior_id": warrior_id})


class UpdateWarrior:
    """A warrior's heartbeat; answered with the projects document, known id or not."""

    def __init__(self, admin: Admin):
        self.admin = admin

    def on_post(self, req, resp):
        body = _warrior_body(req)
        warrior_id = body.get("warrior_id")
        if isinstance(warrior_id, str) and 0 < len(warrior_id) <= 64:
            hq.heartbeat(self.admin.r, warrior_id)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(hq.document(self.admin.r, req.prefix))
