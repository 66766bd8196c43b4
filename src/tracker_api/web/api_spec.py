"""What a route reads and answers, declared once on its handler: ``@declare(...)``.

The declaration is the route's entry in the OpenAPI document (openapi.py: paths, methods, path
parameters and tokens come from the app's routes, the rest from here), and for the admin API it
is also what the responder accepts: the body fields and query parameters it names are the only
ones taken (tracker_api.admin.api_request refuses the others). Schemas are JSON Schema (OpenAPI
3.1's dialect); the helpers below keep a declaration to a line or two.

Refusals are named by status only (``refuses=(400, 409)``): their body is the face's one error
shape (errors.refusal_content), and the statuses every route of a kind can answer are added by
the document itself (401/403 where a token is needed, 404 where the path has parameters, 503
when Redis is unreachable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]
JSON, TEXT_PLAIN = "application/json", "text/plain"
# What the renderer's files answer for anonymous aggregates (tracker_api.public.public_cache):
# past a worker's byte budget, a query too long, one not rendered yet ("Retry-After: 1").
RENDERED_REFUSALS = (414, 429, 503)

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}
ANY_OBJECT: Schema = {"type": "object"}
STRINGS: Schema = {"type": "array", "items": STR}
INT_OR_STR: Schema = {"type": ["integer", "string"]}
NULLABLE_STR: Schema = {"type": ["string", "null"]}
NULLABLE_INT: Schema = {"type": ["integer", "null"]}


def text(max_chars: int, min_chars: int = 1) -> Schema:
    return {"type": "string", "minLength": min_chars, "maxLength": max_chars}


def integer(low: int, high: int | None = None) -> Schema:
    schema: Schema = {"type": "integer", "minimum": low}
    if high is not None:
        schema["maximum"] = high
    return schema


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def obj(required: tuple[str, ...] = (), /, **properties: Schema) -> Schema:
    """An object with PROPERTIES, of which REQUIRED must be there (and maybe others)."""
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def closed_obj(required: tuple[str, ...] = (), /, **properties: Schema) -> Schema:
    """An object with only PROPERTIES, of which REQUIRED must be there: a body whose other
    fields are refused (Operation.fields)."""
    return {**obj(required, **properties), "additionalProperties": False}


def example(schema: Schema, *values: Any) -> Schema:
    """SCHEMA with VALUES as its examples: what a client would send (schemathesis sends them
    first, tests/e2e/test_openapi_contract.py)."""
    return {**schema, "examples": list(values)}


def mapping(values: Schema) -> Schema:
    """An object whose every value is VALUES (names chosen by the caller: settings, shards)."""
    return {"type": "object", "additionalProperties": values}


@dataclass(frozen=True)
class Answer:
    """One status's answer: a description and its body per media type (no body: empty)."""

    description: str
    content: Mapping[str, Schema | None] = field(default_factory=dict)  # None: no schema (an empty body)


def json_answer(schema: Schema, description: str = "done") -> Answer:
    return Answer(description, {JSON: schema})


def text_answer(description: str, schema: Schema = STR) -> Answer:
    return Answer(description, {TEXT_PLAIN: schema})


@dataclass(frozen=True)
class Operation:
    """A handler's declaration (see the module's docstring)."""

    summary: str
    body: Schema | None = None  # the body's schema; None: the handler reads no body fields
    body_types: tuple[str, ...] = (JSON,)
    body_required: bool = False
    query: Mapping[str, Schema] = field(default_factory=dict)
    path: Mapping[str, Schema] = field(default_factory=dict)  # path parameters' schemas, when narrower
    answers: Mapping[int, Answer] = field(default_factory=dict)
    refuses: tuple[int, ...] = ()
    description: str = ""
    token_optional: bool = False  # a bearer token may be sent (and is then checked)

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The body fields a closed JSON body may hold, in their declared order (None: any)."""
        body = self.body
        if body is None or body.get("additionalProperties") is not False:
            return None
        return tuple(body.get("properties", {}))


def declare(summary: str, **declared):
    """Attach an Operation(SUMMARY, **DECLARED) to the handler as ``handler.api``."""
    operation = Operation(summary, **declared)

    def mark(handler):
        handler.api = operation
        return handler

    return mark


def declared(handler) -> Operation | None:
    return getattr(handler, "api", None)
