"""The OpenAPI 3.1 description of the app's API, built from its routes: ``GET /api/openapi.json``.

Nothing here lists a path. The document walks the Falcon app's router (every route app.py and
the route tables add: the warrior protocol, the HQ, the admin API's ADMIN_ROUTES), skipping the
HTML pages it is told to; each responder gives its methods, its path parameters (with Falcon's
converters) and, for the admin API, the token it needs (``responder.needs``: any, global or
project) and the refusals the responder itself answers (``responder.refuses``). What a route
reads and answers comes from its handler's declaration (api_spec.declare). A route without one
still appears, marked ``x-undeclared`` (tests/api/web/test_openapi.py fails on it).

The document is built on the first GET and kept: routes do not change while a process serves,
and the warriors' routes never pay for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import falcon
import orjson

from tracker_api.web.api_spec import JSON, Operation, Schema, declare, declared, json_answer, obj
from tracker_api.web.errors import REFUSAL_SCHEMAS, refusal_shape
from tracker_api.web.token_bucket import TokenBucket
from tracker_core.keyspace import PROJECT_NAME_RE

OPENAPI_PATH = "/api/openapi.json"
FIELD_RE = re.compile(r"{(\w+)(?::(\w+)(?:\([^)]*\))?)?}")
CONVERTER_SCHEMAS: dict[str, Schema] = {"int": {"type": "integer"}, "path": {"type": "string"}}
# Names of path parameters with the same meaning everywhere: a project is named as the admin
# verbs name it (a warrior route answers 404 for any other name).
PATH_SCHEMAS: dict[str, Schema] = {
    "project": {"type": "string", "pattern": "^" + PROJECT_NAME_RE.pattern.replace("\\Z", "$")},
    "queue": {"type": "string", "examples": ["todo", "backfeed", "secondary", "redo", "downloader:alice"]},
}
STATUS_REASONS = {
    400: "bad input (one line saying why); nothing changed",
    401: "no token, or an unknown, revoked or expired one",
    403: "refused: the token does not cover this (or the client is blocked)",
    404: "no such project, item or path",
    409: "conflict with the current state; nothing changed",
    413: "body too large",
    414: "query too long",
    429: "rate limited",
    503: "storage unavailable or refusing the change, retry later",
}
BEARER = "bearerToken"
# Each face's refusal body (web.errors.REFUSAL_SCHEMAS), once in the document's components.
REFUSAL_NAMES = {
    "backfeed": "BackfeedRefusal",
    "admin_api": "AdminError",
    "admin_page": "PageRefusal",
    "text": "TextRefusal",
}
REFUSAL_REFS = {shape: f"#/components/schemas/{name}" for shape, name in REFUSAL_NAMES.items()}
TOKEN_NEEDS = {
    "any": "any valid admin token",
    "global": "a global admin token",
    "project": "a token for the project in the path (or a global one)",
}


def routes(app: falcon.App) -> Iterator[tuple[str, str, object]]:
    """(uri template, method, responder) for every route of APP, Falcon's own responders left out."""
    todo: list[Any] = list(app._router._roots)  # CompiledRouterNode: in the order they were added
    while todo:
        node = todo.pop(0)
        todo[0:0] = node.children
        if node.resource is None or node.method_map is None:
            continue
        for method, responder in sorted(node.method_map.items()):
            if not getattr(responder, "__module__", "").startswith("falcon."):
                yield str(node.uri_template), method, responder


def _path_parameters(template: str, operation: Operation | None) -> tuple[str, list[dict]]:
    parameters = []
    for name, converter in FIELD_RE.findall(template):
        schema = dict(CONVERTER_SCHEMAS.get(converter, PATH_SCHEMAS.get(name, {"type": "string"})))
        if operation is not None and name in operation.path:
            schema = dict(operation.path[name])
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    return FIELD_RE.sub(lambda m: "{" + m.group(1) + "}", template), parameters


def _media(content) -> dict:
    return {media: ({} if schema is None else {"schema": schema}) for media, schema in content.items()}


def _responses(path: str, operation: Operation | None, refuses: set[int]) -> dict:
    responses: dict[str, dict] = {}
    for status, answer in sorted((operation.answers if operation else {}).items()):
        entry: dict = {"description": answer.description}
        if answer.content:
            entry["content"] = _media(answer.content)
        responses[str(status)] = entry
    shape = refusal_shape(path)
    media = REFUSAL_SCHEMAS[shape][0].split(";")[0]
    for status in sorted(refuses):
        entry = responses.setdefault(str(status), {"description": STATUS_REASONS.get(status, "refused")})
        entry.setdefault("content", {}).setdefault(media, {"schema": {"$ref": REFUSAL_REFS[shape]}})
    return dict(sorted(responses.items()))


def _operation(template: str, method: str, responder) -> tuple[str, dict]:
    operation = declared(responder)
    path, parameters = _path_parameters(template, operation)
    needs = getattr(responder, "needs", None)
    refuses = {503} | set(getattr(responder, "refuses", ()))
    if parameters:
        refuses.add(404)  # an unknown project, or a parameter that routes nowhere once decoded
    if needs is not None:
        refuses |= {401, 403}
    entry: dict = {"operationId": f"{method.lower()}{re.sub(r'[^A-Za-z0-9]+', '_', path)}".rstrip("_")}
    entry["tags"] = ["admin" if path.startswith("/api/admin/") else "warrior"]
    if operation is None:
        entry["summary"] = "(not declared yet)"
        entry["x-undeclared"] = True
    else:
        entry["summary"] = operation.summary
        if operation.description:
            entry["description"] = operation.description
        refuses |= set(operation.refuses)
        parameters += [
            {"name": name, "in": "query", "required": False, "schema": schema}
            for name, schema in operation.query.items()
        ]
        if operation.body is not None:
            refuses |= {400, 413}
            content = {
                media: operation.body if media == JSON else {"type": "string"}
                for media in operation.body_types
            }
            entry["requestBody"] = {"required": operation.body_required, "content": _media(content)}
    if parameters:
        entry["parameters"] = parameters
    if needs is not None:
        entry["security"] = [{BEARER: []}]
        entry["x-token"] = needs
        entry["description"] = (
            entry.get("description", "") + f"\n\nNeeds {TOKEN_NEEDS.get(needs, needs)}."
        ).strip()
    elif operation is not None and operation.token_optional:
        entry["security"] = [{}, {BEARER: []}]
    else:
        entry["security"] = []
    entry["responses"] = _responses(path, operation, refuses)
    if not entry["responses"]:
        entry["responses"] = {"default": {"description": "not declared yet"}}
    return path, entry


def document(app: falcon.App, skip: tuple[str, ...] = ()) -> dict:
    """The OpenAPI document of APP's routes, the pages left out: SKIP holds their templates
    ("/admin/*": every template under /admin/)."""
    paths: dict[str, dict] = {}
    for template, method, responder in routes(app):
        if any(template == page or (page.endswith("*") and template.startswith(page[:-1])) for page in skip):
            continue
        path, entry = _operation(template, method, responder)
        paths.setdefault(path, {})[method.lower()] = entry
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "tracker: the warrior protocol and the admin API",
            "version": _version(),
            "description": (
                "The warrior protocol (docs/protocol.md) is what unmodified seesaw clients speak; "
                "the admin API (docs/operations.md) takes `Authorization: Bearer TOKEN`. Built "
                "from the server's own routes: every path, method, parameter and token here is "
                "one the server routes. `/P/multi=K//request` (a double slash) is answered as "
                "`/P/multi=K/request`."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": {REFUSAL_NAMES[shape]: schema for shape, (_, schema) in REFUSAL_SCHEMAS.items()},
            "securitySchemes": {
                BEARER: {"type": "http", "scheme": "bearer", "description": "an admin token"}
            },
        },
    }


def _version() -> str:
    try:
        return metadata.version("tracker")
    except metadata.PackageNotFoundError:
        return "0"


# Anyone may ask for the document (about 100 KB): a worker sends at most this many bytes of it
# a second (tracker_api.web.token_bucket), 40 documents, and answers 429 past it. A client reads
# it once; a flood would otherwise keep the cores copying it.
BYTES_PER_S = 4 << 20


class OpenApiDocument:
    """``GET /api/openapi.json``: the document of APP, built once (SKIP: page prefixes)."""

    def __init__(self, app: falcon.App, skip: tuple[str, ...] = (), bytes_per_s: float = BYTES_PER_S):
        self.app = app
        self.skip = skip
        self._body: bytes | None = None
        self.budget = TokenBucket(bytes_per_s, bytes_per_s)

    @declare(
        "The OpenAPI document of this API",
        answers={200: json_answer(obj(("openapi", "paths")))},
        refuses=(429,),
    )
    def on_get(self, req, resp):
        if self._body is None:
            self._body = orjson.dumps(document(self.app, self.skip))
        if not self.budget.take(len(self._body)):
            raise falcon.HTTPTooManyRequests(
                title="the API's description was sent too often this second; ask again",
                headers={"Retry-After": "1"},
            )
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self._body
