"""What an admin API handler reads from its request: the Call, query parameters, typed body fields.

Input the verbs cannot see is checked here: a body is a JSON object with only the fields its
handler declares (``Call.body``; the declaration is web.api_spec's ``@declare``, whose query
parameters are the only ones api_routes lets through), and JSON values have the types the verbs
take; a refusal is a BadInput (400) or, for a body that is not JSON or too large, a Refused.
admin_handlers.py uses it, as do the admin pages' forms.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from tracker_api.web.errors import Refused, read_bounded
from tracker_core.admin import checks, paging
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.project import settings_schema

MAX_JSON_BYTES = 1 << 20
MAX_UPLOAD_BYTES = 64 << 20  # an item list uploaded as text, one name per line
DIGITS_RE = re.compile(r"[0-9]{1,20}\Z")


class Call:
    """What a handler gets: the request, the path parameters, the caller's token, and the admin
    context acting as that token (what the verbs audit)."""

    def __init__(self, req, params: dict, token, ctx: AdminContext, segments_dir: Path):
        self.req, self.params, self.token = req, params, token
        self.ctx = ctx
        self.segments_dir = segments_dir  # where the done log is archived (the log routes read it)
        self.project: str | None = params.get("project")  # None on a global route

    @property
    def project_name(self) -> str:
        """The project a project route names."""
        if self.project is None:
            raise TypeError("a global route names no project")
        return self.project

    fields: tuple[str, ...] | None = None  # the body fields the handler declares (api_spec)

    def body(self, allowed: tuple[str, ...] | None = None) -> dict:
        """The JSON object sent (an empty body is {}); with ALLOWED (by default the fields the
        handler declares), any other field is refused."""
        if allowed is None:
            allowed = self.fields
        raw = read_limited(self.req, MAX_JSON_BYTES, self.project)
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

    def uploaded_names(self) -> list[str]:
        """The item names uploaded: JSON {"items": [...]}, or text with one name per line."""
        kind = (self.req.content_type or "").split(";")[0].strip().lower()
        if kind == "application/json":
            names = self.body(("items",)).get("items")
            if type(names) is not list or any(type(n) is not str for n in names):
                raise BadInput("'items' must be a list of strings")
            return names
        raw = read_limited(self.req, MAX_UPLOAD_BYTES, self.project)
        # Only a line end ends a name: str.splitlines() also splits at NEL, U+2028, FF and VT, which
        # URL names may hold. A line that is not UTF-8 is read with surrogateescape: the verb refuses
        # it on its own (counted) and adds the rest.
        return [line.removesuffix("\r") for line in raw.decode("utf-8", "surrogateescape").split("\n")]


def read_limited(req, limit: int, project) -> bytes:
    """The body, refused (413, counted) past LIMIT bytes."""
    return read_bounded(req, limit, "admin_too_large", project)


def required(body: dict, name: str):
    value = body.get(name)
    if value is None:
        raise BadInput(f"missing {name!r}")
    return value


def str_field(
    body: dict, name: str, max_chars: int, default: str | None = None, empty_ok: bool = False
) -> str:
    """Field NAME as a string (null or absent: DEFAULT, or refused without one)."""
    value = body.get(name)
    if value is None and default is not None:
        return default
    return checks.text(required(body, name), name, max_chars, empty_ok)


def int_field(body: dict, name: str, default: int, low: int, high: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not int or not low <= value <= high:
        raise BadInput(f"{name!r} must be an integer from {low} to {high}")
    return value


def cursor_field(body: dict) -> int | str:
    """A body's "cursor": an integer (a one-shard project's cursor), or the "SHARD:CURSOR" text
    a page of a sharded project returned (checked by the verb, admin.paging)."""
    value = body.get("cursor")
    return value if type(value) is str else int_field(body, "cursor", 0, 0, checks.MAX_CURSOR)


def bool_field(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if type(value) is not bool:
        raise BadInput(f"{name!r} must be true or false")
    return value


def setting_values(values: dict) -> dict[str, str]:
    """JSON setting values as the verbs take them: strings, numbers and booleans only."""
    out = {}
    for name, value in values.items():
        if name not in settings_schema.SETTINGS:
            raise BadInput(
                f"unknown setting {name[:80]!r} (known: {', '.join(sorted(settings_schema.SETTINGS))})"
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
