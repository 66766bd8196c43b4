"""Answer the warriors' hot routes without building Falcon's Request and Response.

POST /P/request, /P/done, /P/done+request (each also as /P/multi=K/...) make up nearly all of
the tracker's traffic, and on them Falcon's request and response objects, routing, middleware
and error dispatch cost about as much worker CPU as everything else together. ``HotPath`` runs
the very responders Falcon would (warrior.RequestResource and its siblings, unchanged) with two
small stand-ins for the request and the response, and writes the answer itself: the same
status, headers and body as Falcon, the same request metrics, the same refusal handlers (so
refusals are answered and counted alike).

What is hot is decided once per distinct path by Falcon's own router (after the same slash
collapsing and trailing-slash stripping the app applies), and cached: any method but POST, any
path the router sends elsewhere, anything unusual in the request (a Content-Length that is not
a plain number, no body stream, a path that is not ASCII) goes to Falcon as before
(app._collapse_slashes asks ``answer`` first).
"""

from __future__ import annotations

import time
from typing import Any

import falcon

from tracker_api.warrior_api import warrior_routes
from tracker_api.web.web_headers import is_admin_path

HOT_RESOURCES = (
    warrior_routes.RequestResource,
    warrior_routes.DoneResource,
    warrior_routes.DoneRequestResource,
)
MAX_CACHED_PATHS = 4096  # distinct paths remembered (a scan of random paths only refills it)
# A longer path is routed afresh each time: bjoern takes request lines of up to 80 KB, and 4,096
# of those would hold 320 MB of a worker's memory. A warrior's path is far shorter.
MAX_CACHED_PATH_CHARS = 256
# A longer Content-Length goes to Falcon: int() refuses past 4,300 digits (ValueError, a 500
# here), and 18 digits already claim an exabyte (413 by read_json's check before any read).
MAX_LENGTH_DIGITS = 18
# errors.answer answers these in JSON or HTML (resp.media, pages): the stand-in answers text only.
_NOT_TEXT_PREFIXES = ("/backfeed/",)
_NOSNIFF = ("x-content-type-options", "nosniff")  # web_headers.SecurityHeaders, on every answer
_DEFAULT_CONTENT_TYPE = ("content-type", falcon.MEDIA_JSON)  # the app's media type
_UNSEEN = object()  # a path not in the route cache


def collapsed(path: str) -> str:
    """PATH with "//" collapsed the way the app routes it (app._collapse_slashes' rule): only
    before an item name, which may hold "//" itself (a URL)."""
    if "//" not in path:
        return path
    head, sep, name = path.partition("/items/")
    while "//" in head:
        head = head.replace("//", "/")
    return head + sep + name


class _Body:
    """The request body read at most to its Content-Length, as Falcon's bounded_stream reads it
    (a WSGI server's input stream may block past the end)."""

    __slots__ = ("stream", "left")

    def __init__(self, stream, length: int):
        self.stream = stream
        self.left = length

    def read(self, size: int | None = -1) -> bytes:
        # No size (or a negative one): the rest of the body, as a file's read() gives it.
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.stream.read(size) if size > 0 else b""
        self.left -= len(data)
        return data


class _Request:
    """What the warrior responders and the refusal handlers read of a request."""

    __slots__ = ("environ", "method", "path", "content_length", "bounded_stream", "remote_addr")

    def __init__(self, environ, path: str, content_length: int | None, stream):
        self.environ = environ
        self.method = "POST"
        self.path = path
        self.content_length = content_length
        self.bounded_stream = _Body(stream, content_length or 0)
        # Falcon's remote_addr, whose default it is when the server gives none.
        self.remote_addr = environ.get("REMOTE_ADDR", "127.0.0.1")

    def get_header(self, name: str):
        return self.environ.get("HTTP_" + name.upper().replace("-", "_"))


class _Response:
    """What the warrior responders and the refusal handlers set on a response.

    Its defaults are class attributes, so making one runs no Python __init__ (a tenth of what
    the hot path's own machinery costs a request)."""

    status = 200
    content_type: str | None = None  # unset: the app's default, sent last as Falcon sends it
    data: bytes | None = None
    text: str | None = None
    headers: list[tuple[str, str]] | None = None  # set_header's, sent before the others as Falcon sends them

    def set_header(self, name: str, value: str) -> None:
        if self.headers is None:
            self.headers = []
        self.headers.append((name.lower(), value))


def _in_falcon_order(resp: _Response, body: bytes) -> list:
    """RESP's headers in the order Falcon sends them when a handler set headers of its own:
    as they were set (a content type set after them), the middleware's, the length, and the
    app's media type last if none was set."""
    headers = list(resp.headers or ())
    if resp.content_type is not None:
        headers.append(("content-type", resp.content_type))
    headers += [_NOSNIFF, ("content-length", str(len(body)))]
    if not any(name == "content-type" for name, _ in headers):
        headers.append(_DEFAULT_CONTENT_TYPE)
    return headers


class HotPath:
    """The hot routes of FALCON_APP answered directly (``answer``), with its router, its error
    handlers and its request metrics (REQUESTS_SEEN)."""

    def __init__(self, falcon_app: falcon.App, requests_seen):
        self.falcon_app = falcon_app
        self.requests_seen = requests_seen
        self._routes: dict[str, tuple | None] = {}
        self._status_lines: dict[int, str] = {}
        self._router = falcon_app._router
        self._strip_slash = falcon_app.req_options.strip_url_path_trailing_slash

    def route(self, path_info: str) -> tuple | None:
        """(responder, params, path, uri_template, collapsed PATH_INFO) for a hot POST to
        PATH_INFO, else None."""
        try:
            return self._routes[path_info]
        except KeyError:
            pass
        found = self._find(path_info)
        if len(path_info) > MAX_CACHED_PATH_CHARS:
            return found
        if len(self._routes) >= MAX_CACHED_PATHS:
            self._routes.clear()
        self._routes[path_info] = found
        return found

    def _find(self, path_info: str) -> tuple | None:
        if not path_info.isascii():  # Falcon re-decodes such a path: leave it to Falcon
            return None
        path = shown = collapsed(path_info)
        # As falcon.Request computes req.path from PATH_INFO.
        if self._strip_slash and len(path) != 1 and path.endswith("/"):
            path = path[:-1]
        if is_admin_path(path):  # SecurityHeaders adds Cache-Control there
            return None
        if path.startswith(_NOT_TEXT_PREFIXES):  # a project named "backfeed": refused in JSON
            return None
        found = self._router.find(path)
        if found is None:
            return None
        resource, method_map, params, template = found
        if not isinstance(resource, HOT_RESOURCES):
            return None
        responder = method_map.get("POST")
        if responder is None or getattr(responder, "__self__", None) is not resource:
            return None
        return responder, params, path, template, shown

    def answer(self, environ, start_response) -> list | None:
        """Answer a POST (the caller checked the method) if it is hot; None: it is not, the
        caller hands it to Falcon."""
        path_info = environ.get("PATH_INFO")
        stream = environ.get("wsgi.input")
        if path_info is None or stream is None:
            return None
        length = environ.get("CONTENT_LENGTH")
        if length:
            if not (length.isdigit() and length.isascii() and len(length) <= MAX_LENGTH_DIGITS):
                # Falcon answers that one itself (400, or 413 for a huge length)
                return None
            length = int(length)
        else:
            length = None
        found: Any = self._routes.get(path_info, _UNSEEN)
        if found is _UNSEEN:
            found = self.route(path_info)
        if found is None:
            return None
        started = time.perf_counter()
        responder, params, path, template, shown = found
        if shown != path_info:  # as _collapse_slashes leaves it, for the access log
            environ["PATH_INFO"] = shown
        req = _Request(environ, path, length, stream)
        resp = _Response()
        try:
            responder(req, resp, **params)
        except Exception as exc:  # noqa: BLE001 - dispatched as Falcon dispatches it
            self._handle(req, resp, exc, params)
        status = resp.status
        if resp.text is not None:
            body = resp.text.encode()
        else:
            body = resp.data if resp.data is not None else b""
        if resp.headers is not None:
            headers = _in_falcon_order(resp, body)
        elif resp.content_type is None:
            headers = [_NOSNIFF, ("content-length", str(len(body))), _DEFAULT_CONTENT_TYPE]
        else:
            headers = [("content-type", resp.content_type), _NOSNIFF, ("content-length", str(len(body)))]
        start_response(self._status_lines.get(status) or self._status_line(status), headers)
        self.requests_seen.observe(template, "POST", status, time.perf_counter() - started)
        return [body]

    def _handle(self, req, resp, exc: Exception, params: dict) -> None:
        """Answer EXC as the app would: with the handler the app registered for its type, else
        (a bug: an HTTPError or any other exception) with Falcon's own handler, which reads the
        request's Accept header and so gets a real falcon.Request (the cost does not matter)."""
        app = self.falcon_app
        handler = app._find_error_handler(exc)
        assert handler is not None  # the app has one for Exception
        if getattr(handler, "__self__", None) is not app:
            handler(req, resp, exc, params)
            return
        real_req = app._request_type(req.environ, options=app.req_options)
        real_resp = app._response_type(options=app.resp_options)
        handler(real_req, real_resp, exc, params)
        resp.status = real_resp.status_code
        resp.headers = list(real_resp.headers.items())  # content-type and Vary, in their order
        resp.content_type = None
        resp.data = real_resp.data

    def _status_line(self, status) -> str:
        line = self._status_lines.get(status)
        if line is None:
            line = self._status_lines[status] = falcon.code_to_http_status(status)
        return line
