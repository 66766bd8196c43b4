"""Admin authentication: ``Authorization: Bearer TOKEN``, checked before anything else is read.

No token, an unknown, revoked or expired one is 401 (the same answer for each); a token used on
a project outside its scope, or on a route that needs a global admin, is 403, as is a read-only
token on a change (``writes``: every method but GET and HEAD, every form post but logout). All
are counted and change nothing. Expiry is judged by Redis's clock (tracker_core.infra
.redis_clock), like every other "now" of the tracker. A token that passes every check records its
last use (tokens.touch: at most once a minute per token per process); a refusal writes nothing.
"""

from __future__ import annotations

from tracker_api.web.errors import Refused
from tracker_core.access import tokens
from tracker_core.access.tokens import Token
from tracker_core.infra import redis_clock

ANY, GLOBAL, PROJECT = "any", "global", "project"
READ_METHODS = frozenset({"GET", "HEAD"})  # what a read-only token may send


class Authenticator:
    def __init__(self, redis_client):
        self.r = redis_client

    def require(self, req, needs: str, project: str | None = None, writes: bool | None = None) -> Token:
        """The caller's token if it may do what NEEDS says (for PROJECT), else Refused. WRITES
        (by default: the request's method is not a read) refuses a read-only token."""
        header = req.get_header("Authorization") or ""
        scheme, _, text = header.partition(" ")
        if scheme.lower() != "bearer" or not text.strip():
            raise Refused(401, "admin token required (Authorization: Bearer TOKEN)", "admin_unauthenticated")
        if writes is None:
            writes = req.method not in READ_METHODS
        return self.check(text.strip(), needs, project, writes)

    def check(self, text: str, needs: str, project: str | None = None, writes: bool = False) -> Token:
        """The token TEXT's record if it may do what NEEDS says (for PROJECT, a change when
        WRITES), else Refused."""
        # Redis's time, which a node refusing to serve for its own clock still knows: the admin
        # faces and /metrics (which says why it refuses) go on answering.
        now_ms = redis_clock.now_ms(self.r, checked=False)
        token = tokens.verify(self.r, text, now_ms)
        if token is None:
            raise Refused(401, "unknown or revoked admin token", "admin_bad_token")
        if needs == GLOBAL and not token.is_global:
            raise Refused(403, "this needs a global admin token", "admin_forbidden")
        if needs == PROJECT and not token.allows(project or ""):
            raise Refused(403, f"this token is not for project {project!r}", "admin_forbidden")
        if writes and token.read_only:
            raise Refused(403, "this token is read-only: it changes nothing", "admin_forbidden")
        tokens.touch(self.r, token.token_id, now_ms)  # after every check: a refusal writes nothing
        return token
