"""The CLI's one error map: what went wrong -> exit code and one line, never a traceback.

Exit 2 is click's own, for a command line that does not parse (click.UsageError: it shows the
usage banner). Everything the tracker refuses or cannot reach is a failure: exit 1, one line
(click.ClickException), no banner. An exception the map does not know is a bug and keeps its
traceback.
"""

from __future__ import annotations

import errno

import click
import redis

from tracker_api.cli.runlock import DataDirBusy
from tracker_api.web import redact
from tracker_core.admin.errors import AdminError
from tracker_core.donelog.log_archive import LogUnreadable
from tracker_core.infra import rawredis
from tracker_core.infra.embedded import RedisServerError
from tracker_core.scripts import ScriptError

USAGE = 2
FAILURE = 1

# What the tracker refuses: the admin verbs' typed errors (BadInput, NotFound, Conflict), a data
# directory another `tracker run` holds, segment files this node cannot read, a Redis that
# would not start.
REFUSALS = (AdminError, DataDirBusy, LogUnreadable, RedisServerError)
NO_REDIS = (redis.ConnectionError, redis.TimeoutError, rawredis.ConnectionLost)


class Failure(click.ClickException):
    """A failure reported in one line with exit 1 (newlines in a message are folded)."""

    exit_code = FAILURE

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()) or "failed")


class PortInUse(Failure):
    def __init__(self, host: str, port: int, option: str):
        super().__init__(
            f"port {port} is in use on {host}: stop what holds it (a tracker still running?) "
            f"or choose another with {option}"
        )


def no_redis_line(redis_url: str) -> str:
    return f"no Redis at {redact.redact(redis_url)}: is `tracker run` running?"


def as_failure(exc: BaseException, redis_url: str) -> Failure | None:
    """The one line and exit code for EXC, or None for an exception that is a bug."""
    where = redact.redact(redis_url)
    # Subclasses of ConnectionError that mean something else than "nobody answers":
    if isinstance(exc, redis.AuthenticationError):
        return Failure(f"Redis at {where} refused the credentials: {exc}")
    if isinstance(exc, redis.BusyLoadingError):
        return Failure(f"Redis at {where} is loading its data: try again in a moment")
    # A Cluster none of whose nodes answers raises the base class itself (its subclasses are
    # refusals of a command, not a missing Redis).
    if isinstance(exc, NO_REDIS) or type(exc) is redis.RedisClusterException:
        return Failure(no_redis_line(redis_url))
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return Failure(f"address in use: {exc.strerror}")
    if isinstance(exc, REFUSALS):
        return Failure(str(exc))
    # Redis refused the command itself (protected mode's DENIED, NOAUTH, OOM under noeviction, a
    # read-only replica...): its reply is the one line an operator needs; nothing was changed by
    # a script that failed before its first write, and the verbs check before they write.
    if isinstance(exc, rawredis.OutcomeUnknown):
        return Failure(f"the connection to Redis at {where} broke mid-command: check before retrying")
    if isinstance(exc, (ScriptError, redis.ResponseError, rawredis.RedisError)):
        return Failure(f"Redis at {where} refused: {exc}")
    return None
