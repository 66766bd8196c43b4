"""The typed refusals of the admin verbs and the core paths below them (intake, the warrior
HQ): a face maps the type, never the text.

They live below the admin package so that a core module can raise them without loading it
(tracker_core.admin.errors re-exports them for the faces).

Each carries a one-line message for the person who asked. Faces map them once:
BadInput -> exit 1 / HTTP 400, NotFound -> exit 1 / 404, Conflict -> exit 1 / 409.
Redis connection errors are not wrapped: they pass through as redis-py's own exceptions.
"""

from __future__ import annotations


class AdminError(ValueError):
    """An admin request refused before (or instead of) any change; the message is one line.

    A ValueError, so a caller that only checks values can catch it with the rest.
    """


class BadInput(AdminError):
    """The request itself is wrong: a bad name, value, pattern, cursor or combination."""


class NotFound(AdminError):
    """The thing named (project, limit, token, secret, shard, segment) does not exist."""


class Conflict(AdminError):
    """The request is valid but the state refuses it: already exists, or kept changing."""
