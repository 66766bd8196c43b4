"""Reading and checking a form post: the login cookies, Origin, the CSRF field, the body."""

from __future__ import annotations

import hashlib
import hmac
import io
import urllib.parse

import falcon
from falcon.media.multipart import MultipartFormHandler

from tracker_api.admin.api_request import MAX_UPLOAD_BYTES
from tracker_api.web.errors import Refused, read_bounded

COOKIE = "tracker_admin"
LOGIN_COOKIE = "tracker_login"  # the login form's CSRF nonce
LOGIN_NONCE_S = 3600
MAX_FORM_BYTES = 16 << 20
MAX_FORM_FIELDS = 300  # the dead page's checkboxes (a page of base.LISTED) and its other fields


def csrf_for(token_text: str) -> str:
    return hmac.new(token_text.encode(), b"tracker admin csrf", hashlib.sha256).hexdigest()


class FormError:
    """A refusal shown in the form it came from (FORM: the action's name)."""

    def __init__(self, form: str, message: str):
        self.form, self.message = form, message


class Form(dict):
    """A posted form: the last value of each field; ``every(name)`` for repeated fields."""

    def __init__(self, pairs: list[tuple[str, str]]):
        super().__init__(pairs)
        self.pairs = pairs

    def every(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def text(self, name: str, default: str = "") -> str:
        return self.get(name, default).strip()


def check_origin(req, project) -> None:
    """Refuse a form posted from another site (a second check beside the CSRF field).

    Browsers send Origin on every POST; a request without one is not a browser's cross-site
    post. Only the host is compared: behind a TLS proxy the scheme and port differ.
    """
    origin = req.get_header("Origin")
    if origin is None:
        return
    if urllib.parse.urlsplit(origin).hostname != (req.host or "").lower():
        raise Refused(403, "form posted from another site", "admin_bad_origin", project)


def read_form(req, project) -> Form:
    """The posted form, URL-encoded or multipart (an uploaded file's text under its field)."""
    kind = (req.content_type or "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        raw = read_bounded(req, MAX_UPLOAD_BYTES, "admin_too_large", project)
        return _multipart(raw, req.content_type, project)
    raw = read_bounded(req, MAX_FORM_BYTES, "admin_too_large", project)
    try:
        pairs = urllib.parse.parse_qsl(
            raw.decode("utf-8"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
        )
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return Form(pairs)


def _multipart(raw: bytes, content_type: str, project) -> Form:
    pairs = []
    try:
        form = MultipartFormHandler().deserialize(io.BytesIO(raw), content_type, len(raw))
        for part in form:
            # A file's lines may be any bytes: one that is not UTF-8 is refused by the verb on
            # its own (counted), as the API's upload does.
            data = part.stream.read()
            pairs.append(
                (part.name or "", data.decode("utf-8", "surrogateescape" if part.filename else "strict"))
            )
            if len(pairs) > MAX_FORM_FIELDS:
                raise ValueError("too many fields")
    except (falcon.HTTPError, UnicodeDecodeError, ValueError):
        raise Refused(400, "malformed form", "admin_bad_form", project) from None
    return Form(pairs)


class Session:
    """The logged-in browser: its token's text and record, and the CSRF field its forms carry."""

    def __init__(self, text: str, token):
        self.text, self.token = text, token
        self.csrf = csrf_for(text)

    def check_csrf(self, form: Form, project) -> None:
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            raise Refused(403, "bad or missing CSRF field: reload the page", "admin_bad_csrf", project)
