"""The admin API under /api/admin/ (token-authenticated, audited).

Every admin route is declared once in ``ADMIN_ROUTES`` with what it needs: any valid token, a
global admin's, or one for the project in its path. The token is checked before the body is
read; every change is written to the audit log with the token's id. The operations themselves
are the ones the CLI runs (tracker_core.admin, operations, tokens, hq).

Input is checked before anything changes: a body is a JSON object with only the fields its
handler names (``Call.body``), query parameters are only those a handler declares (``@query``),
and every value is checked for type and range (here or in tracker_core.operations). A bad one
is answered 4xx with a one-line reason and counted (tracker_api.errors), never 500.
"""

from __future__ import annotations

import re

import falcon
import orjson

from tracker_api.auth import ANY, GLOBAL, PROJECT, Authenticator
from tracker_api.config import AppConfig
from tracker_api.errors import Refused, read_bounded
from tracker_core import audit, hq, operations, tokens
from tracker_core import settings as settings_mod
from tracker_core.admin import NOT_UTF8, Admin, AdminError

MAX_JSON_BYTES = 1 << 20
MAX_UPLOAD_BYTES = 64 << 20  # an item list uploaded as text, one name per line
MAX_REASON_CHARS = 300
DIGITS_RE = re.compile(r"[0-9]{1,20}\Z")
TOKEN_ID_RE = re.compile(r"[0-9a-f]{12}\Z")


class Call:
    """What a handler gets: the request, the path parameters, the caller's token, helpers."""

    def __init__(self, api: AdminApi, req, params: dict, token):
        self.api, self.req, self.params, self.token = api, req, params, token
        self.admin: Admin = api.admin
        self.project = params.get("project")

    def body(self, allowed: tuple[str, ...] | None = None) -> dict:
        """The JSON object sent (an empty body is {}); with ALLOWED, any other field is refused."""
        raw = _read(self.req, MAX_JSON_BYTES, self.project)
        if not raw.strip():
            body = {}
        else:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise Refused(400, "body is not valid JSON", "admin_bad_json", self.project) from None
            if type(body) is not dict:
                raise Refused(400, "body must be a JSON object", "admin_bad_json", self.project)
        if allowed is not None:
            unknown = sorted(set(body) - set(allowed))
            if unknown:
                known = ", ".join(allowed) if allowed else "none: send no body"
                raise AdminError(f"unknown field {unknown[0][:80]!r} (known: {known})")
        return body

    def _param(self, name: str):
        value = self.req.params.get(name)
        if isinstance(value, list):
            raise AdminError(f"query parameter {name!r} given more than once")
        return value or None

    def int_param(self, name: str, default: int, low: int = 0, high: int = operations.MAX_CURSOR) -> int:
        raw = self._param(name)
        if raw is None:
            return default
        if not DIGITS_RE.match(raw) or not low <= int(raw) <= high:
            raise AdminError(f"query parameter {name!r} must be an integer from {low} to {high}")
        return int(raw)

    def str_param(self, name: str, default, max_chars: int):
        raw = self._param(name)
        return default if raw is None else operations.check_text(raw, name, max_chars)

    def audit(self, action: str, **detail) -> None:
        audit.record(self.admin.r, self.token.token_id, action, self.project, **detail)


def _read(req, limit: int, project) -> bytes:
    return read_bounded(req, limit, "admin_too_large", project)


def query(*names: str):
    """Declare the query parameters a GET handler reads; the responder refuses any other."""

    def mark(handler):
        handler.query = frozenset(names)
        return handler

    return mark


def _need(body: dict, name: str):
    value = body.get(name)
    if value is None:
        raise AdminError(f"missing {name!r}")
    return value


def _str(body: dict, name: str, max_chars: int, default: str | None = None, empty_ok: bool = False) -> str:
    """Field NAME as a string (null or absent: DEFAULT, or refused without one)."""
    value = body.get(name)
    if value is None and default is not None:
        return default
    return operations.check_text(_need(body, name), name, max_chars, empty_ok)


def _int(body: dict, name: str, default: int, low: int, high: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not int or not low <= value <= high:
        raise AdminError(f"{name!r} must be an integer from {low} to {high}")
    return value


def _bool(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not bool:
        raise AdminError(f"{name!r} must be true or false")
    return value


def _setting_values(values: dict) -> dict[str, str]:
    """JSON setting values as the validators take them: strings, numbers and booleans only."""
    out = {}
    for name, value in values.items():
        if name not in settings_mod.SETTINGS:
            settings_mod.validate(name, "")  # the one-line "unknown setting" reason
        if type(value) is bool:
            value = "true" if value else "false"
        elif type(value) in (int, float):
            value = str(value)
        elif type(value) is not str:
            kind = {type(None): "null", list: "a list", dict: "an object"}[type(value)]
            raise AdminError(f"setting {name!r} must be a string, number or boolean, not {kind}")
        out[name] = value
    return out


# -- handlers: (call) -> JSON-ready answer ------------------------------------------------------


def list_projects(c: Call):
    names = c.admin.projects()
    if not c.token.is_global:
        names = [n for n in names if c.token.allows(n)]
    return {"projects": names}


def create_project(c: Call):
    body = c.body(("project", "settings"))
    name = _str(body, "project", 64)
    values = body.get("settings")
    if values is not None and type(values) is not dict:
        raise AdminError("'settings' must be an object")
    values = _setting_values(values or {})
    if not c.admin.create_project(name, **values):
        raise Refused(409, f"project {name!r} already exists", "admin_conflict")
    c.project = name
    c.audit("project.create", settings=values)
    return {"created": name}


def show_project(c: Call):
    return c.admin.show_project(c.project)


def delete_project(c: Call):
    c.body(())
    operations.delete_project(c.admin, c.project)
    c.audit("project.delete")
    return {"deleted": c.project}


def set_settings(c: Call):
    values = _setting_values(c.body())
    if not values:
        raise AdminError("no settings given")
    age = c.admin.set_settings(c.project, values)
    c.audit("project.settings", settings=values)
    return {"settings_age": age}


def pause(c: Call):
    c.body(())
    age = operations.pause(c.admin, c.project, True)
    c.audit("project.pause")
    return {"settings_age": age, "paused": True}


def resume(c: Call):
    c.body(())
    age = operations.pause(c.admin, c.project, False)
    c.audit("project.resume")
    return {"settings_age": age, "paused": False}


def queues(c: Call):
    return c.admin.status(c.project)


def _upload_names(c: Call) -> list[str]:
    kind = (c.req.content_type or "").split(";")[0].strip().lower()
    if kind == "application/json":
        names = c.body(("items",)).get("items")
        if type(names) is not list or any(type(n) is not str for n in names):
            raise AdminError("'items' must be a list of strings")
    else:
        raw = _read(c.req, MAX_UPLOAD_BYTES, c.project)
        # Only a line end ends a name: str.splitlines() also splits at NEL, U+2028, FF and VT,
        # which URL names may hold.
        names = [line.removesuffix("\r") for line in raw.decode("utf-8", "surrogateescape").split("\n")]
    return operations.check_items([n for n in names if n])


def add_items(c: Call):
    queue = operations.check_queue(c.params["queue"])
    c.admin._keys(c.project)
    names = _upload_names(c)
    added = duplicates = 0
    refused: dict = {}
    for a, d in c.admin.add_items(c.project, names, queue=queue, refused=refused):
        added += a
        duplicates += d
    # A text upload is read with surrogateescape: a line that is not UTF-8 is refused on its own
    # (counted) and the rest is added; the answer says how many when there were any.
    answer = {"added": added, "duplicates": duplicates}
    if refused:
        answer["refused_not_utf8"] = refused[NOT_UTF8]
    c.audit("items.add", queue=queue, **answer)
    return answer


def count_queue(c: Call):
    return {"queue": c.params["queue"], "count": operations.count(c.admin, c.project, c.params["queue"])}


@query("count")
def sample(c: Call):
    count = c.int_param("count", 20, 1, operations.MAX_SAMPLE)
    return {"items": operations.sample(c.admin, c.project, c.params["queue"], count)}


def clear(c: Call):
    c.body(())
    dropped = operations.clear(c.admin, c.project, c.params["queue"])
    c.audit("queue.clear", queue=c.params["queue"], dropped=dropped)
    return {"dropped": dropped}


def move(c: Call):
    body = c.body(("to", "pattern", "cursor", "limit"))
    target = _str(body, "to", 100)
    pattern = _str(body, "pattern", operations.MAX_PATTERN_CHARS, "*")
    result = operations.move(
        c.admin,
        c.project,
        c.params["queue"],
        target,
        pattern=pattern,
        cursor=_int(body, "cursor", 0, 0, operations.MAX_CURSOR),
        limit=_int(body, "limit", 1000, 1, operations.MAX_PAGE),
    )
    c.audit("queue.move", source=c.params["queue"], target=target, pattern=pattern, moved=result["moved"])
    return result


@query("cursor", "count", "pattern")
def claims(c: Call):
    return operations.list_claims(
        c.admin,
        c.project,
        cursor=c.int_param("cursor", 0),
        count=c.int_param("count", 100, 1, operations.MAX_PAGE),
        pattern=c.str_param("pattern", "*", operations.MAX_PATTERN_CHARS),
    )


def release(c: Call):
    body = c.body(("downloader", "older_than_s", "pattern", "cursor", "limit"))
    chosen = {k: body[k] for k in ("downloader", "older_than_s", "pattern") if body.get(k) is not None}
    result = operations.release(
        c.admin,
        c.project,
        **chosen,
        cursor=_int(body, "cursor", 0, 0, operations.MAX_CURSOR),
        limit=_int(body, "limit", 1000, 1, operations.MAX_PAGE),
    )
    c.audit("claims.release", filter=chosen, released=result["released"])
    return result


def block(c: Call):
    body = c.body(("entry", "remove"))
    entry, remove = _str(body, "entry", 200), _bool(body, "remove")
    entry = c.admin.block(entry, c.project, remove)  # as stored: ip:10.0.0.1/32 is ip:10.0.0.1
    c.audit("block.remove" if remove else "block.add", entry=entry)
    return {"entry": entry, "blocked": not remove}


def upload_target(c: Call):
    body = c.body(("url", "state"))
    url, state = _str(body, "url", 2000), _str(body, "state", 10, "active")
    if state not in ("active", "inactive", "remove"):
        raise AdminError("'state' must be active, inactive or remove")
    c.admin.set_upload_target(c.project, url, "" if state == "remove" else state)
    c.audit("upload_target", url=url, state="removed" if state == "remove" else state)
    return {"url": url, "state": "removed" if state == "remove" else state}


@query("count", "before")
def project_audit(c: Call):
    c.admin._keys(c.project, must_exist=False)  # a deleted project's log stays readable
    return audit.read(
        c.admin.r, c.project, c.int_param("count", 100, 1, audit.MAX_PAGE), c.str_param("before", None, 41)
    )


@query("count", "before")
def global_audit(c: Call):
    return audit.read(
        c.admin.r, None, c.int_param("count", 100, 1, audit.MAX_PAGE), c.str_param("before", None, 41)
    )


def list_tokens(c: Call):
    return {"tokens": [t.__dict__ for t in tokens.list_tokens(c.admin.r)]}


def create_token(c: Call):
    body = c.body(("scope", "note"))
    scope = _str(body, "scope", 64)
    text, record = tokens.create(c.admin.r, scope, _str(body, "note", tokens.MAX_NOTE, "", True))
    c.project = None if record.is_global else scope
    c.audit("token.create", token_id=record.token_id, scope=scope)
    return {"token": text, "token_id": record.token_id, "scope": scope}


def revoke_token(c: Call):
    c.body(())
    token_id = c.params["token_id"]
    if not TOKEN_ID_RE.match(token_id):
        raise AdminError(f"bad token id {token_id[:40]!r}: the 12 hex characters after trk_")
    if not tokens.revoke(c.admin.r, token_id):
        raise operations.NotFound(f"no token {token_id!r}")
    c.audit("token.revoke", token_id=token_id)
    return {"revoked": token_id}


@query("offset", "count")
def warriors(c: Call):
    return hq.registry(c.admin.r, c.int_param("offset", 0, 0, 10**9), c.int_param("count", 100, 1, 1000))


def set_hq(c: Call):
    result = operations.set_hq(c.admin, c.body())
    c.audit("hq.set", fields=result["hq"])
    return result


# pattern and item-type limits


def list_limits(c: Call):
    return {"limits": c.admin.limits(c.project)}


def add_limit(c: Call):
    body = c.body(("name", "pattern", "rate", "reclassify"))
    name, pattern, rate = _need(body, "name"), _need(body, "pattern"), _need(body, "rate")
    reclassify_now = _bool(body, "reclassify", True)
    result = operations.add_limit(c.admin, c.project, name, pattern, rate, reclassify_now)
    c.audit("limit.add", name=name, pattern=pattern, rate=str(rate), reclassify=reclassify_now)
    return result


def remove_limit(c: Call):
    c.body(())
    result = operations.remove_limit(c.admin, c.project, c.params["name"])
    c.audit("limit.remove", name=c.params["name"])
    return result


def reclassify(c: Call):
    c.body(())
    result = operations.reclassify(c.admin, c.project)
    c.audit("limit.reclassify", **result)
    return result


# backfeed secrets and shards


def list_backfeed_secrets(c: Call):
    return {"secrets": operations.list_backfeed_secrets(c.admin, c.project)}


def create_backfeed_secret(c: Call):
    c.body(())
    result = operations.create_backfeed_secret(c.admin, c.project)
    c.audit("backfeed_secret.create", id=result["id"])  # never the secret itself
    return result


def revoke_backfeed_secret(c: Call):
    c.body(())
    result = operations.revoke_backfeed_secret(c.admin, c.project, c.params["secret_id"])
    c.audit("backfeed_secret.revoke", id=result["revoked"])
    return result


@query("cursor", "count")
def shard_map(c: Call):
    return operations.shard_map(
        c.admin, c.project, c.int_param("cursor", 0), c.int_param("count", 1000, 1, operations.MAX_PAGE)
    )


def map_shard(c: Call):
    body = c.body(("queue",))
    result = operations.map_shard(c.admin, c.project, c.params["shard"], _str(body, "queue", 100))
    c.audit("backfeed_shard.map", **result)
    return result


def unmap_shard(c: Call):
    c.body(())
    result = operations.unmap_shard(c.admin, c.project, c.params["shard"])
    c.audit("backfeed_shard.unmap", shard=result["shard"])
    return result


# dead items and segments


@query("cursor", "count")
def list_dead(c: Call):
    return operations.list_dead(
        c.admin, c.project, c.int_param("cursor", 0), c.int_param("count", 100, 1, operations.MAX_PAGE)
    )


def requeue_dead(c: Call):
    body = c.body(("items", "all", "queue", "cursor", "limit"))
    queue = _str(body, "queue", 100, "todo")
    everything = _bool(body, "all")
    if everything == (body.get("items") is not None):
        raise AdminError("give 'items' (a list of names) or \"all\": true")
    if everything:
        result = operations.requeue_dead_page(
            c.admin,
            c.project,
            _int(body, "cursor", 0, 0, operations.MAX_CURSOR),
            _int(body, "limit", 1000, 1, operations.MAX_PAGE),
            queue,
        )
        c.audit("dead.requeue", queue=queue, all=True, requeued=result["requeued"])
        return result
    if body.get("cursor") is not None or body.get("limit") is not None:
        raise AdminError("'cursor' and 'limit' go with \"all\": true")
    result = operations.requeue_dead(c.admin, c.project, body["items"], queue)
    c.audit("dead.requeue", queue=queue, items=len(body["items"]), requeued=result["requeued"])
    return result


def list_segments(c: Call):
    return operations.list_segments(c.admin, c.project)


@query("kind", "since", "downloader", "cursor", "limit")
def log_page(c: Call):
    """A page of the done log (archived segments, then the stream), or of the uploads or
    bad_dones streams, oldest first; "cursor" in the answer continues it (null: the end)."""
    from tracker_core import log_archive

    k = c.admin._keys(c.project)
    since = c.str_param("since", None, 40)
    cursor = c.str_param("cursor", None, 41)
    if cursor is not None:
        log_archive.parse_id(cursor)
    try:
        return log_archive.page(
            c.admin.r,
            k,
            c.api.config.segments_dir or log_archive.segments_dir_from_env(),
            c.str_param("kind", "done", 20),
            None if since is None else log_archive.parse_since(since),
            c.str_param("downloader", None, 64),
            cursor,
            c.int_param("limit", 100, 1, log_archive.PAGE_MAX),
        )
    except log_archive.LogUnreadable as exc:  # this node does not see the segment files
        raise Refused(503, str(exc), "admin_log_unreadable", c.project) from None


def redo_items(c: Call):
    """Re-queue done or seen items on purpose: by names, or a page of done items by pattern."""
    body = c.body(("items", "pattern", "queue", "cursor", "limit", "even_if_offloaded"))
    queue = _str(body, "queue", 100, operations.REDO_QUEUE)
    pattern, names = body.get("pattern"), body.get("items")
    if names is not None and (body.get("cursor") is not None or body.get("limit") is not None):
        raise AdminError("'cursor' and 'limit' go with 'pattern'")
    result = operations.redo(
        c.admin,
        c.project,
        names=names,
        pattern=pattern,
        cursor=_int(body, "cursor", 0, 0, operations.MAX_CURSOR),
        limit=_int(body, "limit", 1000, 1, operations.MAX_PAGE),
        queue=queue,
        even_if_offloaded=_bool(body, "even_if_offloaded"),
    )
    chosen = {"pattern": pattern} if pattern is not None else {"items": len(names)}
    c.audit("items.redo", queue=queue, **chosen, **{k: v for k, v in result.items() if k != "cursor"})
    return result


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
    ("GET", P + "/limits", PROJECT, list_limits),
    ("POST", P + "/limits", PROJECT, add_limit),
    ("DELETE", P + "/limits/{name}", PROJECT, remove_limit),
    ("POST", P + "/reclassify", PROJECT, reclassify),
    ("GET", P + "/backfeed-secrets", PROJECT, list_backfeed_secrets),
    ("POST", P + "/backfeed-secrets", PROJECT, create_backfeed_secret),
    ("DELETE", P + "/backfeed-secrets/{secret_id}", PROJECT, revoke_backfeed_secret),
    ("GET", P + "/backfeed-shards", PROJECT, shard_map),
    ("POST", P + "/backfeed-shards/{shard}", PROJECT, map_shard),
    ("DELETE", P + "/backfeed-shards/{shard}", PROJECT, unmap_shard),
    ("GET", P + "/dead", PROJECT, list_dead),
    ("POST", P + "/dead/requeue", PROJECT, requeue_dead),
    ("GET", P + "/segments", PROJECT, list_segments),
    ("POST", P + "/redo", PROJECT, redo_items),
    ("GET", P + "/log", PROJECT, log_page),
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
    def __init__(self, admin: Admin, config: AppConfig = AppConfig()):
        self.admin = admin
        self.config = config
        self.auth = Authenticator(admin.r)

    def responder(self, needs: str, handler):
        accepted = getattr(handler, "query", frozenset())

        def respond(resource, req, resp, **params):
            token = self.auth.require(req, needs, params.get("project"))
            call = Call(self, req, params, token)
            try:
                unknown = sorted(set(req.params) - accepted)
                if unknown:
                    known = ", ".join(sorted(accepted)) or "none"
                    raise AdminError(f"unknown query parameter {unknown[0][:80]!r} (known: {known})")
                answer = handler(call)
            except (AdminError, tokens.TokenError, ValueError) as exc:
                text = (str(exc).splitlines() or ["bad request"])[0][:MAX_REASON_CHARS]
                status = (
                    404 if isinstance(exc, operations.NotFound) or text.startswith("unknown project") else 400
                )
                raise Refused(status, text, "admin_bad_request", call.project) from None
            resp.content_type = falcon.MEDIA_JSON
            resp.data = dumps(answer)

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


def add_admin_routes(app, admin: Admin, config: AppConfig = AppConfig()) -> None:
    api = AdminApi(admin, config)
    routes: dict[str, _Route] = {}
    for method, path, needs, handler in ADMIN_ROUTES:
        route = routes.setdefault(path, _Route())
        responder = api.responder(needs, handler)
        setattr(route, "on_" + method.lower(), responder.__get__(route))
    for path, route in routes.items():
        app.add_route(path, route)
