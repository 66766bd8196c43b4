"""The warrior protocol (docs/protocol.md): request, done, done+request, release, upload, uploaded, item status.

Every resource parses and checks its input fully before it touches Redis, then makes one script
call. A check that fails raises ``Refused`` (4xx, one-line reason, counted, nothing changed).
"""

from __future__ import annotations

from typing import cast

import falcon
import orjson

from tracker_api.warrior_api import protocol_shapes
from tracker_api.web.api_spec import declare
from tracker_api.web.client_ip import client_ip
from tracker_api.web.errors import Refused
from tracker_core import scripts
from tracker_core.compiled import protocol
from tracker_core.items.engine import Engine
from tracker_core.project.settings_schema import MAX_MULTI_CEILING

MAX_BODY_BYTES = 1 << 20
MAX_ITEM_CHARS = protocol.MAX_ITEM_CHARS
MAX_DONE_ITEMS = MAX_MULTI_CEILING  # a done reports what one request claimed
# A claimed batch must always be reportable: a 413 on its done would be retried for ever and the
# items never done. The warrior sends json.dumps output (ASCII only), which writes a character
# outside the BMP as two \uXXXX escapes: 12 bytes for one character (any other escaped one: 6),
# and the NUL between names as 6. So a whole claim of the longest names takes up to 1,000 x
# (4,096 x 12 + 6) bytes; 1 MiB more is room for the other fields (downloader, version, bytes, id).
JSON_BYTES_PER_CHAR_MAX = 12
MAX_DONE_BODY_BYTES = MAX_DONE_ITEMS * (MAX_ITEM_CHARS * JSON_BYTES_PER_CHAR_MAX + 6) + (1 << 20)
MAX_ID_BYTES = 4096  # the id as JSON; a larger or deeper one is replaced, the done still counts


def read_json(req, project: str, limit: int = MAX_BODY_BYTES) -> dict:
    """The request body as a JSON object, or Refused."""
    length = req.content_length
    if length is not None and length > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", "bad_too_large", project)
    raw = req.bounded_stream.read(limit + 1)
    if len(raw) > limit:
        raise Refused(413, f"body too large (limit {limit} bytes)", "bad_too_large", project)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Refused(400, "body is not valid JSON", "bad_json", project) from None
    if type(body) is not dict:
        raise Refused(400, "body must be a JSON object", "bad_json", project)
    return body


def downloader_of(body: dict, project: str, field: str = "downloader") -> str:
    name = body.get(field)
    if not protocol.valid_downloader(name):
        raise Refused(400, f"{field} must match ^[-_a-zA-Z0-9]{{3,30}}$", "bad_downloader", project)
    return cast(str, name)  # valid_downloader took only a str


def version_of(body: dict, project: str) -> str:
    version = body.get("version", "")
    if version is None:
        return ""
    if type(version) is not str or len(version) > 64:
        raise Refused(400, "version must be a string of at most 64 characters", "bad_version", project)
    return version


def id_text(value) -> tuple[str, str | None]:
    """The done's id as JSON text for the log, and why it was replaced (None if it was not).

    The id only goes into the log, so one that cannot be kept (nested deeper than orjson writes,
    254 levels; or over MAX_ID_BYTES as JSON) is replaced by a note and the done still counts: a
    refusal would make the warrior send the same done for ever.
    """
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return '{"dropped": "id nested too deep"}', "dones_id_dropped"
    if len(text) > MAX_ID_BYTES:
        return f'{{"dropped": "id of {len(text)} bytes as JSON"}}', "dones_id_dropped"
    return text.decode(), None


NOT_UTF8 = "name is not valid UTF-8: no JSON answer can carry it"
HOLDS_NUL = "name holds NUL: the client splits answers on NUL and done could never report it"


def answer_body(items: list[str], legacy: bool, extra: dict | None = None) -> bytes | None:
    """The body of a claim's answer, or None when a name in ITEMS cannot reach the client.

    EXTRA (the project's extra_parameters, parsed with its cached settings) adds its keys to
    the JSON answer: seesaw copies every key of it into the item. The bare text answer of a
    client without api_version 2 has no place for them.

    Names come from Redis decoded with surrogateescape, so one that is not UTF-8 (old data)
    makes the encoding fail, and one holding NUL adds a separator: both are found here while
    the answer is built, at no extra cost, instead of by a byte scan in the claim script.
    """
    if legacy:
        if "\0" in items[0]:
            return None
        try:
            return items[0].encode("utf-8")
        except UnicodeEncodeError:
            return None
    joined = "\0".join(items)
    if joined.count("\0") != len(items) - 1:
        return None
    try:
        return orjson.dumps({**extra, "item_name": joined} if extra else {"item_name": joined})
    except orjson.JSONEncodeError:
        return None


def unservable(items: list[str]) -> dict[str, str]:
    """The names among ITEMS that no client can receive, with why."""
    bad = {}
    for name in items:
        if "\0" in name:
            bad[name] = HOLDS_NUL
        else:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                bad[name] = NOT_UTF8
    return bad


def item_names(value, project: str) -> list[str]:
    if type(value) is not str:
        raise Refused(400, "item must be a string (names joined by NUL)", "bad_item", project)
    names = protocol.split_items(value, MAX_DONE_ITEMS, MAX_ITEM_CHARS)
    if names is None:
        raise Refused(
            400,
            f"item must hold 1 to {MAX_DONE_ITEMS} names of 1 to {MAX_ITEM_CHARS} characters",
            "bad_item",
            project,
        )
    return names


class ProtocolResource:
    def __init__(self, engine: Engine, trust_forwarded: bool = False):
        self.engine = engine
        # The number of trusted proxies in front (True: one); see client_ip.
        self.trusted_proxies = int(trust_forwarded)

    def known_project(self, project: str):
        settings = self.engine.settings(project)
        if settings is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        return settings

    def client_ip(self, req, project: str) -> str:
        """The client's address; Refused (counted in PROJECT) when a proxy's header is unreadable."""
        return client_ip(req, self.trusted_proxies, project)

    def claim(self, req, resp, project: str, body: dict, multi: int, ip: str | None = None) -> None:
        """Answer a request body: items as JSON (api_version 2) or bare text, else 404/429/455/403.

        IP is the client's address when the caller has it already (done+request)."""
        settings = self.known_project(project)
        downloader = downloader_of(body, project)
        version = version_of(body, project)
        if settings.min_version and protocol.version_older(version, settings.min_version):
            raise Refused(
                455,
                f"client version {version or 'unknown'} is older than "
                f"{settings.min_version}; update your warrior",
                "requests_outdated",
                project,
            )
        legacy = body.get("api_version") != "2"
        wanted = 1 if legacy else max(1, min(multi, settings.max_multi))
        ip = self.client_ip(req, project) if ip is None else ip
        status, items = self.engine.claim(project, downloader, ip, wanted)
        if status == scripts.claim.codes.OK:
            answer = answer_body(items, legacy, settings.extra_parameters)
            if answer is None:
                # The claim is made: take back what the client cannot receive, answer the rest.
                bad = unservable(items)
                if bad:
                    self.engine.bury_unservable(project, downloader, bad)
                items = [name for name in items if name not in bad]
                answer = answer_body(items, legacy, settings.extra_parameters) if items else None
            if answer is not None:
                resp.status = 200
                resp.content_type = falcon.MEDIA_TEXT if legacy else falcon.MEDIA_JSON
                resp.data = answer
                return
            status = 404  # every name given was taken back (scripts.claim.codes.NOTHING, as an HTTP status)
        if status == scripts.claim.codes.UNKNOWN_PROJECT:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        # 404 (nothing available), 429 (rate limited), 403 (blocked): empty body, as clients expect.
        # The claim script counted them already.
        resp.status = status
        resp.data = b""

    def complete(self, project: str, body: dict, ip: str = "") -> None:
        """Apply a done body; Refused on bad input. Unknown names are counted, never added."""
        self.known_project(project)
        downloader = downloader_of(body, project)
        version = version_of(body, project)
        names = item_names(body.get("item"), project)
        domain_bytes = protocol.flatten_bytes(body.get("bytes", {}))
        if domain_bytes is None:
            raise Refused(
                400,
                "bytes must map at most 32 domain names to non-negative integers totalling under 10 TB",
                "bad_bytes",
                project,
            )
        item_id, dropped = id_text(body.get("id"))
        if self.engine.done(project, downloader, version, names, domain_bytes, item_id, ip) is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        if dropped:
            self.engine.count(project, dropped)


class RequestResource(ProtocolResource):
    @declare("Claim items", body=protocol_shapes.CLAIM_BODY, **protocol_shapes.CLAIMING)
    def on_post(self, req, resp, project: str, multi: int = 1):
        if multi < 1:
            raise Refused(400, "multi must be at least 1", "bad_multi", project)
        self.claim(req, resp, project, read_json(req, project), multi)


class DoneResource(ProtocolResource):
    @declare(
        "Report items done", body=protocol_shapes.DONE_BODY, body_required=True, answers=protocol_shapes.OK
    )
    def on_post(self, req, resp, project: str, multi: int = 1):
        body = read_json(req, project, MAX_DONE_BODY_BYTES)
        self.complete(project, body, self.client_ip(req, project))
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = "OK"


class DoneRequestResource(ProtocolResource):
    """done+request: complete the finished items, then claim new ones, in one HTTP round trip."""

    @declare(
        "Report items done, then claim", body=protocol_shapes.DONE_REQUEST_BODY, **protocol_shapes.CLAIMING
    )
    def on_post(self, req, resp, project: str, multi: int = 1):
        body = read_json(req, project, MAX_DONE_BODY_BYTES)
        ip = self.client_ip(req, project)  # read once for both halves, before either changes anything
        if "item" in body:
            self.complete(project, body, ip)
        self.claim(req, resp, project, body, multi, ip)


class ReleaseResource(ProtocolResource):
    @declare(
        "Give claimed items back",
        body=protocol_shapes.RELEASE_BODY,
        body_required=True,
        answers=protocol_shapes.OK,
    )
    def on_post(self, req, resp, project: str):
        self.known_project(project)
        body = read_json(req, project, MAX_DONE_BODY_BYTES)
        names = item_names(body.get("item"), project)
        # The open-source tracker released without asking who; a named downloader may only
        # give back its own claims.
        downloader = downloader_of(body, project) if "downloader" in body else ""
        self.engine.release(project, downloader, names)
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = "OK"


class UploadResource(ProtocolResource):
    @declare(
        "Where to upload",
        body=protocol_shapes.UPLOAD_BODY,
        body_required=True,
        answers=protocol_shapes.UPLOAD_TARGET,
    )
    def on_post(self, req, resp, project: str):
        self.known_project(project)
        body = read_json(req, project)
        downloader = downloader_of(body, project)
        target = self.engine.upload_target(project, downloader)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"upload_target": target} if target else {})


class UploadedResource(ProtocolResource):
    @declare(
        "Log an upload", body=protocol_shapes.UPLOADED_BODY, body_required=True, answers=protocol_shapes.OK
    )
    def on_post(self, req, resp, project: str):
        self.known_project(project)
        body = read_json(req, project)
        uploader = downloader_of(body, project, "uploader")
        item, server = body.get("item"), body.get("server", "")
        if type(item) is not str or not 0 < len(item) <= MAX_ITEM_CHARS:
            raise Refused(400, "item must be a non-empty string", "bad_item", project)
        if type(server) is not str or len(server) > 512:
            raise Refused(400, "server must be a string", "bad_server", project)
        self.engine.uploaded(project, uploader, item, server)
        resp.content_type = falcon.MEDIA_TEXT
        resp.text = "OK"


class ItemStatusResource(ProtocolResource):
    @declare(
        "Where an item is",
        path=protocol_shapes.ITEM_PATH,
        answers=protocol_shapes.ITEM_STATUS,
        refuses=(400,),
    )
    def on_get(self, req, resp, project: str, item: str):
        self.known_project(project)
        if not item.endswith(".json"):
            raise Refused(
                404, "item status is at /P/items/NAME.json (NAME percent-encoded)", "bad_path", project
            )
        item = item[: -len(".json")]
        if not 0 < len(item) <= MAX_ITEM_CHARS:
            raise Refused(400, "bad item name", "bad_item", project)
        place = self.engine.item_place(project, item)
        if place is None:
            raise Refused(404, f"unknown project {project!r}", "bad_unknown_project")
        # status and downloader as the old tracker answered them; the other keys say more
        # (tracker_core.items.item_status).
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps(place)
