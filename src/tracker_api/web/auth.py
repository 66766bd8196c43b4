"""Admin authentication: ``Authorization: Bearer TOKEN``, checked before anything else is read.

No token or an unknown one is 401; a project token used on another project, or on a route
that needs a global admin, is 403. Both are counted and change nothing.
"""

from __future__ import annotations

from tracker_api.web.errors import Refused
from tracker_core.access import tokens
from tracker_core.access.tokens import Token

ANY, GLOBAL, PROJECT = "any", "global", "project"


class Authenticator:
    def __init__(self, redis_client):
        self.r = redis_client

    def require(self, req, needs: str, project: str | None = None) -> Token:
        """The caller's token if it may do what NEEDS says (for PROJECT), else Refused."""
        header = req.get_header("Authorization") or ""
        scheme, _, text = header.partition(" ")
        if scheme.lower() != "bearer" or not text.strip():
            raise Refused(401, "admin token required (Authorization: Bearer TOKEN)", "admin_unauthenticated")
        return self.check(text.strip(), needs, project)

    def check(self, text: str, needs: str, project: str | None = None) -> Token:
        """The token TEXT's record if it may do what NEEDS says (for PROJECT), else Refused."""
        token = tokens.verify(self.r, text)
        if token is None:
            raise Refused(401, "unknown or revoked admin token", "admin_bad_token")
        if needs == GLOBAL and not token.is_global:
            raise Refused(403, "this needs a global admin token", "admin_forbidden")
        if needs == PROJECT and not token.allows(project or ""):
            raise Refused(403, f"this token is not for project {project!r}", "admin_forbidden")
        return token
