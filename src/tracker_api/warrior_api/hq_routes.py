"""The warrior HQ's public endpoints: GET /projects.json, POST /api/register.json, /api/update.json.

Unauthenticated, called by every seesaw Warrior: the projects document, a registration, and the
heartbeat it sends every ten minutes. Whatever a warrior sends, it gets a 200 with what it needs
to keep working (see RegisterWarrior and UpdateWarrior); only a body that is not a JSON object is
refused, and behind proxies an X-Forwarded-For that does not hold the client's address
(client_ip.py: 400, counted as bad_forwarded_for, before anything is recorded). The registry's
rules are tracker_core.warriors.hq's; its bounds come in the AppConfig.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import falcon
import orjson

from tracker_api.public import public_cache
from tracker_api.warrior_api import protocol_shapes
from tracker_api.web.api_spec import ANY_OBJECT, RENDERED_REFUSALS, declare
from tracker_api.web.client_ip import client_ip, throttle_key
from tracker_api.web.config import AppConfig
from tracker_api.web.errors import Refused, read_bounded
from tracker_api.web.public_url import base_url
from tracker_core import keyspace
from tracker_core.warriors import hq

MAX_WARRIOR_BODY_BYTES = 64 << 10


# A minute: warriors ask every ten minutes (and on start), a project an admin lists shows within
# one, and a proxy or CDN in front may answer a crowd from its copy. Public: it is the same for
# everyone who sends the same Host (a cache keys on it), and with --public-url for everyone.
PROJECTS_CACHE_CONTROL = "public, max-age=60"


def leaderboard_base(req, public_url: str) -> str:
    """What the document's leaderboard URLs start with (tracker_api.web.public_url.base_url)."""
    return base_url(public_url, req.scheme, req.get_header("Host"))


class ProjectsDocument:
    def __init__(self, conn, public_url: str = ""):
        self.conn = conn
        self.public_url = public_url

    @declare(
        "The projects document warriors read",
        answers=protocol_shapes.PROJECTS_DOCUMENT,
        refuses=RENDERED_REFUSALS,
    )
    def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_JSON
        resp.cache_control = [PROJECTS_CACHE_CONTROL]
        resp.data = orjson.dumps(hq.document(self.conn, leaderboard_base(req, self.public_url)))


def _warrior_body(req) -> dict:
    raw = read_bounded(req, MAX_WARRIOR_BODY_BYTES, "admin_too_large")
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise Refused(400, "body is not valid JSON", "bad_json") from None
    if type(body) is not dict:
        raise Refused(400, "body must be a JSON object", "bad_json")
    return body


def _count(conn, *fields: str) -> None:
    """Count refusals outside any project (GLOBAL_STATS), in one round trip."""
    pipe = conn.pipeline(transaction=False)
    for field in fields:
        pipe.hincrby(keyspace.GLOBAL_STATS, field, 1)
    pipe.execute()


class _WarriorResource:
    """What RegisterWarrior and UpdateWarrior keep: the connection, how many proxies append
    to X-Forwarded-For (0: the peer address is the client) and the registry's bounds."""

    def __init__(
        self,
        conn,
        trust_forwarded: bool | int = False,
        bounds: hq.Bounds = hq.Bounds(),
        public_url: str = "",
    ):
        self.conn = conn
        self.trusted_proxies = int(trust_forwarded)
        self.bounds = bounds
        self.public_url = public_url


class RegisterWarrior(_WarriorResource):
    """A warrior's first call: a new warrior id, recorded in the registry within its bounds.

    Past a bound (the address's registrations this hour, the registry's size) nothing is
    stored and the refusal is counted, but the answer is still a 200 with a fresh id: seesaw's
    Warrior treats any other answer as an error and then skips its update, so it would load no
    project list until its next try ten minutes later. With the id it loads the projects (an
    update from an id the registry does not know is answered all the same) and works; it is
    just not listed among the registered warriors.
    """

    @declare("Register a warrior", body=ANY_OBJECT, answers=protocol_shapes.WARRIOR_ID)
    def on_post(self, req, resp):
        body = _warrior_body(req)
        warrior = body.get("warrior", {})
        if not isinstance(warrior, dict):
            raise Refused(400, "'warrior' must be an object", "bad_warrior")
        ip = client_ip(req, self.trusted_proxies)
        try:
            warrior_id = hq.register(self.conn, warrior, ip, throttle_key(ip), bounds=self.bounds)
        except ValueError as exc:
            raise Refused(400, str(exc), "bad_warrior") from None
        except hq.NotRegistered as exc:
            _count(self.conn, exc.field)
            warrior_id = uuid.uuid4().hex
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({"warrior_id": warrior_id})


class UpdateWarrior(_WarriorResource):
    """A warrior's heartbeat; answered with the projects document, known id or not.

    seesaw's Warrior sends {"warrior": {"warrior_id", "lat_lng", "downloader",
    "selected_project"}}; the same fields at the top level are taken too. The registry keeps
    the valid ones (hq.heartbeat_fields) with the IP and the time. A field that is not valid is
    not kept, counted (heartbeat_bad_FIELD) and named in the answer's "refused"; the answer is
    still the document with a 200, as for an unknown id: it is the warrior's list of work, and
    anything else makes seesaw drop its projects until the next update ten minutes later.
    """

    def __init__(self, *args, cache=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.cache = cache

    @declare("A warrior's heartbeat", body=ANY_OBJECT, answers=protocol_shapes.PROJECTS_DOCUMENT)
    def on_post(self, req, resp):
        body = _warrior_body(req)
        warrior = body.get("warrior")
        if not isinstance(warrior, dict) or "warrior_id" not in warrior:
            warrior = body
        warrior_id = warrior.get("warrior_id")
        refused: Sequence[str] = ()
        if isinstance(warrior_id, str) and 0 < len(warrior_id) <= 64:
            fields, refused = hq.heartbeat_fields(warrior, req.user_agent)
            self._heartbeat(warrior_id, fields, client_ip(req, self.trusted_proxies))
            if refused:
                _count(self.conn, *(f"heartbeat_bad_{field}" for field in refused))
        resp.content_type = falcon.MEDIA_JSON
        rendered = self._rendered(req)
        if rendered is not None and not refused:
            resp.data = rendered  # projects.json's bytes as the renderer made them
            return
        document = orjson.loads(rendered) if rendered is not None else self._document(req)
        if refused:
            document["refused"] = "; ".join(hq.HEARTBEAT_REASONS[f] for f in refused)
        resp.data = orjson.dumps(document)

    def _rendered(self, req) -> bytes | None:
        """projects.json as the renderer made it for this Host (tracker_api.public.public_cache), or
        for none when that one is not ready: every heartbeat carries the document, which reads
        every listed project, so it must not be built per heartbeat, nor once per forged Host.
        None without a renderer (the app alone): then it is built here."""
        if self.cache is None:
            return None
        for key in dict.fromkeys(
            (
                public_cache.projects_key(req.get_header("Host"), self.public_url),
                public_cache.projects_key(None, ""),
            )
        ):
            entry = self.cache.lookup(key)
            if entry is not None and entry.status.startswith("200"):
                return entry.body
        return None

    def _document(self, req) -> dict:
        return hq.document(self.conn, leaderboard_base(req, self.public_url))

    def _heartbeat(self, warrior_id: str, fields: dict, ip: str) -> None:
        if hq.heartbeat(self.conn, warrior_id, fields, ip) or not hq.WARRIOR_ID_RE.match(warrior_id):
            return
        # Forgotten (30 days silent, or the registry lost): seesaw never registers again, so its
        # id is registered anew, under the registration throttle and bound.
        try:
            hq.register(
                self.conn,
                {"version": fields.get("version", "")},
                ip,
                throttle_key(ip),
                warrior_id=warrior_id,
                bounds=self.bounds,
            )
            hq.heartbeat(self.conn, warrior_id, fields, ip)
        except hq.NotRegistered as exc:
            _count(self.conn, exc.field)


def add_hq_routes(app, conn, config: AppConfig = AppConfig(), cache=None) -> None:
    """The HQ's routes, with CONFIG's client-IP rule and registry bounds; CACHE (a
    public_cache.PublicCache, None without a renderer) gives update.json its document."""
    bounds = hq.Bounds(config.warriors_max, config.registrations_per_hour)
    app.add_route("/projects.json", ProjectsDocument(conn, config.public_url))
    app.add_route("/api/register.json", RegisterWarrior(conn, config.trust_forwarded, bounds))
    app.add_route(
        "/api/update.json",
        UpdateWarrior(conn, config.trust_forwarded, bounds, config.public_url, cache=cache),
    )
