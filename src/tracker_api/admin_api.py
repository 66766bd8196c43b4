"""The admin API under /api/admin/: token-authenticated, a thin adapter over the admin verbs.

Every route is declared once in ``ADMIN_ROUTES`` with what it needs: any valid token, a global
admin's, or one for the project in its path. The token is checked before the body is read.
A handler turns the request into a verb's arguments (tracker_core.admin: the contract table is
its docstring) and returns the verb's answer as JSON; the verb validates, acts and audits once,
with the token's id as the actor. Nothing here audits or changes Redis itself.

Input the verbs cannot see is checked here: a body is a JSON object with only the fields its
handler names (``Call.body``), query parameters are only those a handler declares (``@query``),
and JSON values have the types the verbs take. Every refusal is one error map
(tracker_api.errors.admin_refusal: BadInput 400, NotFound 404, Conflict 409; Redis unreachable
503), answered as JSON ``{"error": "..."}`` and counted, never a 500.
"""

from __future__ import annotations

import re
from pathlib import Path

import falcon
import orjson

from tracker_api.auth import ANY, GLOBAL, PROJECT, Authenticator
from tracker_api.config import AppConfig
from tracker_api.errors import Refused, admin_refusal, read_bounded
from tracker_core import audit, log_archive
from tracker_core import settings as settings_mod
from tracker_core.admin import (
    backfeed,
    census,
    checks,
    dead,
    hq,
    items,
    limits,
    log,
    paging,
    projects,
    segments,
    tokens,
)
from tracker_core.admin import claims as claim_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput
from tracker_core.item_story import STORY_BUDGET_S
from tracker_core.tokens import MAX_NOTE

MAX_JSON_BYTES = 1 << 20
MAX_UPLOAD_BYTES = 64 << 20  # an item list uploaded as text, one name per line
DEFAULT_SEGMENTS_DIR = Path("var", "segments")
DIGITS_RE = re.compile(r"[0-9]{1,20}\Z")


class Call:
    """What a handler gets: the request, the path parameters, the caller's token, and the admin
    context acting as that token (what the verbs audit)."""

    def __init__(self, api: AdminApi, req, params: dict, token):
        self.api, self.req, self.params, self.token = api, req, params, token
        self.ctx: AdminContext = api.admin.as_actor(token.token_id)
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
                raise BadInput(f"unknown field {unknown[0][:80]!r} (known: {known})")
        return body

    def _param(self, name: str):
        value = self.req.params.get(name)
        if isinstance(value, list):
            raise BadInput(f"query parameter {name!r} given more than once")
        return value or None

    def int_param(self, name: str, default: int, low: int = 0, high: int = checks.MAX_CURSOR) -> int:
        raw = self._param(name)
        if raw is None:
            return default
        if not DIGITS_RE.match(raw) or not low <= int(raw) <= high:
            raise BadInput(f"query parameter {name!r} must be an integer from {low} to {high}")
        return int(raw)

    def cursor_param(self) -> int | str:
        """?cursor=: digits (a one-shard project's cursor) or SHARD:CURSOR (admin.paging)."""
        return paging.face_cursor(self._param("cursor"))

    def str_param(self, name: str, default, max_chars: int):
        raw = self._param(name)
        return default if raw is None else checks.text(raw, name, max_chars)


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
        raise BadInput(f"missing {name!r}")
    return value


def _str(body: dict, name: str, max_chars: int, default: str | None = None, empty_ok: bool = False) -> str:
    """Field NAME as a string (null or absent: DEFAULT, or refused without one)."""
    value = body.get(name)
    if value is None and default is not None:
        return default
    return checks.text(_need(body, name), name, max_chars, empty_ok)


def _int(body: dict, name: str, default: int, low: int, high: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not int or not low <= value <= high:
        raise BadInput(f"{name!r} must be an integer from {low} to {high}")
    return value


def _cursor(body: dict) -> int | str:
    """A body's "cursor": an integer (a one-shard project's cursor), or the "SHARD:CURSOR" text
    a page of a sharded project returned (checked by the verb, admin.paging)."""
    value = body.get("cursor")
    return value if type(value) is str else _int(body, "cursor", 0, 0, checks.MAX_CURSOR)


def _bool(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not bool:
        raise BadInput(f"{name!r} must be true or false")
    return value


def _setting_values(values: dict) -> dict[str, str]:
    """JSON setting values as the verbs take them: strings, numbers and booleans only."""
    out = {}
    for name, value in values.items():
        if name not in settings_mod.SETTINGS:
            raise BadInput(
                f"unknown setting {name[:80]!r} (known: {', '.join(sorted(settings_mod.SETTINGS))})"
            )
        if type(value) is bool:
            value = "true" if value else "false"
        elif type(value) in (int, float):
            value = str(value)
        elif type(value) is not str:
            kind = {type(None): "null", list: "a list", dict: "an object"}[type(value)]
            raise BadInput(f"setting {name!r} must be a string, number or boolean, not {kind}")
        out[name] = value
    return out


# -- handlers: (call) -> the verb's JSON-ready answer -------------------------------------------


def list_projects(c: Call):
    return {"projects": [n for n in projects.list_projects(c.ctx) if c.token.allows(n)]}


def create_project(c: Call):
    body = c.body(("project", "settings", "shards"))
    name = _str(body, "project", 64)
    values = body.get("settings")
    if values is not None and type(values) is not dict:
        raise BadInput("'settings' must be an object")
    return projects.create(c.ctx, name, _setting_values(values or {}), shards=body.get("shards", 1))


def grow_project(c: Call):
    body = c.body(("shards",))
    return projects.grow(c.ctx, c.project, _need(body, "shards"))


def show_project(c: Call):
    return projects.show(c.ctx, c.project)


def delete_project(c: Call):
    c.body(())
    return projects.delete(c.ctx, c.project)


def set_settings(c: Call):
    return projects.set_settings(c.ctx, c.project, _setting_values(c.body()))


def pause(c: Call):
    c.body(())
    return projects.pause(c.ctx, c.project)


def resume(c: Call):
    c.body(())
    return projects.resume(c.ctx, c.project)


def queues(c: Call):
    return census.status(c.ctx, c.project)


def _upload_names(c: Call) -> list[str]:
    kind = (c.req.content_type or "").split(";")[0].strip().lower()
    if kind == "application/json":
        names = c.body(("items",)).get("items")
        if type(names) is not list or any(type(n) is not str for n in names):
            raise BadInput("'items' must be a list of strings")
        return names
    raw = _read(c.req, MAX_UPLOAD_BYTES, c.project)
    # Only a line end ends a name: str.splitlines() also splits at NEL, U+2028, FF and VT, which
    # URL names may hold. A line that is not UTF-8 is read with surrogateescape: the verb refuses
    # it on its own (counted) and adds the rest.
    return [line.removesuffix("\r") for line in raw.decode("utf-8", "surrogateescape").split("\n")]


def add_items(c: Call):
    c.ctx.keys(c.project)  # an unknown project is a 404 before its upload is read
    return items.add(c.ctx, c.project, _upload_names(c), queue=c.params["queue"])


def count_queue(c: Call):
    return items.count(c.ctx, c.project, c.params["queue"])


@query("count")
def sample(c: Call):
    count = c.int_param("count", 20, 1, checks.MAX_SAMPLE)
    return items.sample(c.ctx, c.project, c.params["queue"], count)


def clear(c: Call):
    c.body(())
    return items.clear(c.ctx, c.project, c.params["queue"])


def move(c: Call):
    body = c.body(("to", "pattern", "cursor", "limit"))
    return items.move(
        c.ctx,
        c.project,
        c.params["queue"],
        _str(body, "to", 100),
        pattern=_str(body, "pattern", checks.MAX_PATTERN_CHARS, "*"),
        cursor=_cursor(body),
        limit=_int(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


@query("cursor", "count", "pattern")
def claims(c: Call):
    return claim_verbs.list_claims(
        c.ctx,
        c.project,
        cursor=c.cursor_param(),
        count=c.int_param("count", 100, 1, checks.MAX_PAGE),
        pattern=c.str_param("pattern", "*", checks.MAX_PATTERN_CHARS),
    )


def release(c: Call):
    body = c.body(("downloader", "older_than_s", "pattern", "cursor", "limit"))
    chosen = {k: body[k] for k in ("downloader", "older_than_s", "pattern") if body.get(k) is not None}
    return claim_verbs.release(
        c.ctx,
        c.project,
        **chosen,
        cursor=_cursor(body),
        limit=_int(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


def block(c: Call):
    """A project's block (the project's route) or a global one (/api/admin/blocks)."""
    body = c.body(("entry", "remove"))
    return limits.block(c.ctx, _str(body, "entry", 200), c.project, _bool(body, "remove"))


def upload_target(c: Call):
    body = c.body(("url", "state"))
    return projects.set_upload_target(
        c.ctx, c.project, _str(body, "url", 2000), _str(body, "state", 10, "active")
    )


@query("count", "before")
def project_audit(c: Call):
    return _audit_page(c, c.project)


@query("count", "before")
def global_audit(c: Call):
    return _audit_page(c, None)


def _audit_page(c: Call, project: str | None):
    # A deleted project's log stays readable: the verb checks the name, not the project.
    return log.audit_page(
        c.ctx, project, c.int_param("count", 100, 1, audit.MAX_PAGE), c.str_param("before", None, 41)
    )


def list_tokens(c: Call):
    return tokens.list_tokens(c.ctx)


def create_token(c: Call):
    body = c.body(("scope", "note"))
    return tokens.create(c.ctx, _str(body, "scope", 64), _str(body, "note", MAX_NOTE, "", True))


def revoke_token(c: Call):
    c.body(())
    return tokens.revoke(c.ctx, c.params["token_id"])


@query("offset", "count")
def warriors(c: Call):
    return hq.warriors(c.ctx, c.int_param("offset", 0, 0, 10**9), c.int_param("count", 100, 1, 1000))


def set_hq(c: Call):
    return hq.set_fields(c.ctx, c.body())


# pattern and item-type limits


def list_limits(c: Call):
    return {"limits": limits.list_limits(c.ctx, c.project)}


def add_limit(c: Call):
    body = c.body(("name", "pattern", "rate", "reclassify"))
    return limits.add(
        c.ctx,
        c.project,
        _need(body, "name"),
        _need(body, "pattern"),
        _need(body, "rate"),
        _bool(body, "reclassify", True),
    )


def remove_limit(c: Call):
    c.body(())
    return limits.remove(c.ctx, c.project, c.params["name"])


def reclassify(c: Call):
    c.body(())
    return limits.reclassify(c.ctx, c.project)


# backfeed secrets and shards


def list_backfeed_secrets(c: Call):
    return {"secrets": backfeed.list_secrets(c.ctx, c.project)}


def create_backfeed_secret(c: Call):
    c.body(())
    return backfeed.create_secret(c.ctx, c.project)


def revoke_backfeed_secret(c: Call):
    c.body(())
    return backfeed.revoke_secret(c.ctx, c.project, c.params["secret_id"])


@query("cursor", "count")
def shard_map(c: Call):
    return backfeed.shard_map(
        c.ctx, c.project, c.int_param("cursor", 0), c.int_param("count", 1000, 1, checks.MAX_PAGE)
    )


def map_shard(c: Call):
    body = c.body(("queue",))
    return backfeed.map_shard(c.ctx, c.project, c.params["shard"], _str(body, "queue", 100))


def unmap_shard(c: Call):
    c.body(())
    return backfeed.unmap_shard(c.ctx, c.project, c.params["shard"])


# dead items and segments


@query("cursor", "count")
def list_dead(c: Call):
    return dead.list_dead(c.ctx, c.project, c.cursor_param(), c.int_param("count", 100, 1, checks.MAX_PAGE))


def requeue_dead(c: Call):
    body = c.body(("items", "all", "queue", "cursor", "limit"))
    queue = _str(body, "queue", 100, "todo")
    everything = _bool(body, "all")
    if everything == (body.get("items") is not None):
        raise BadInput("give 'items' (a list of names) or \"all\": true")
    if everything:
        return dead.requeue_page(
            c.ctx,
            c.project,
            _cursor(body),
            _int(body, "limit", 1000, 1, checks.MAX_PAGE),
            queue,
        )
    if body.get("cursor") is not None or body.get("limit") is not None:
        raise BadInput("'cursor' and 'limit' go with \"all\": true")
    return dead.requeue(c.ctx, c.project, body["items"], queue)


def list_segments(c: Call):
    return segments.list_segments(c.ctx, c.project)


@query("kind", "since", "downloader", "item", "cursor", "limit")
def log_page(c: Call):
    """A page of the done log (archived segments, then the stream), or of the uploads or
    bad_dones streams, oldest first; "cursor" in the answer continues it (null: the end)."""
    try:
        return log.done_page(
            c.ctx,
            c.project,
            c.api.segments_dir,
            kind=c.str_param("kind", "done", 20),
            since=c.str_param("since", None, 40),
            downloader=c.str_param("downloader", None, 64),
            cursor=c.str_param("cursor", None, 41),
            limit=c.int_param("limit", 100, 1, log_archive.PAGE_MAX),
            item=c.str_param("item", None, checks.MAX_ITEM_CHARS),
        )
    except log_archive.LogUnreadable as exc:  # this node does not see the segment files
        raise Refused(503, str(exc), "admin_log_unreadable", c.project) from None


@query("name")
def item_story(c: Call):
    """An item's whole story (tracker_core.item_story): the segment files and the done log
    searched; what this node could not read is named in "unread"."""
    name = c.str_param("name", None, checks.MAX_ITEM_CHARS)
    if name is None:
        raise BadInput("give the item's name: ?name=NAME, percent-encoded")
    return items.story(c.ctx, c.project, c.api.segments_dir, [name], STORY_BUDGET_S)[0]


def redo_items(c: Call):
    """Re-queue done or seen items on purpose: by names, or a page of done items by pattern."""
    body = c.body(("items", "pattern", "queue", "cursor", "limit", "even_if_offloaded"))
    if body.get("items") is not None and (body.get("cursor") is not None or body.get("limit") is not None):
        raise BadInput("'cursor' and 'limit' go with 'pattern'")
    return items.redo(
        c.ctx,
        c.project,
        names=body.get("items"),
        pattern=body.get("pattern"),
        cursor=_cursor(body),
        limit=_int(body, "limit", 1000, 1, checks.MAX_PAGE),
        queue=_str(body, "queue", 100, items.REDO_QUEUE),
        even_if_offloaded=_bool(body, "even_if_offloaded"),
    )


P = "/api/admin/projects/{project}"
ADMIN_ROUTES = [
    ("GET", "/api/admin/projects", ANY, list_projects),
    ("POST", "/api/admin/projects", GLOBAL, create_project),
    ("GET", P, PROJECT, show_project),
    ("DELETE", P, GLOBAL, delete_project),
    ("POST", P + "/shards", GLOBAL, grow_project),
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
    ("GET", P + "/item", PROJECT, item_story),
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
    def __init__(self, admin: AdminContext, config: AppConfig = AppConfig()):
        self.admin = admin
        self.auth = Authenticator(admin.conn)
        # Where `tracker maintain` archives the done log (the log route reads it); without one
        # configured, where `tracker run` keeps it by default.
        self.segments_dir = config.segments_dir or DEFAULT_SEGMENTS_DIR

    def responder(self, needs: str, handler):
        accepted = getattr(handler, "query", frozenset())

        def respond(resource, req, resp, **params):
            token = self.auth.require(req, needs, params.get("project"))
            call = Call(self, req, params, token)
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
