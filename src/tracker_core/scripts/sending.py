"""Sending a loaded script to Redis: EVALSHA, and its source once when Redis answers NOSCRIPT.

Works on any connection of tracker_core.infra.connection (the hot path's RawRedis, a topology client,
the admin paths' redis-py client), and on bytes already packed as RESP for RawRedis's
execute_packed (the claim and done of tracker_core.scripts.packed).
"""

from __future__ import annotations

from tracker_core.scripts.loading import SCRIPTS


class ScriptError(Exception):
    """A script failed inside Redis (a bug or a broken data structure)."""


def _is_noscript(exc: Exception) -> bool:
    # redis-py raises NoScriptError with its own message; the raw connection passes Redis's text.
    return type(exc).__name__ == "NoScriptError" or str(exc).startswith("NOSCRIPT")


def _is_error_reply(exc: Exception) -> bool:
    # Both clients raise their own error types for a Redis error reply; their subclasses
    # (a lost connection, an unknown outcome) are raised as they are.
    return type(exc).__name__ in ("RedisError", "ResponseError")


def run(conn, name: str, keys, args):
    """Run script NAME on CONN with KEYS and ARGV as given; raise ScriptError. Callers go
    through a binding (tracker_core.scripts), which builds KEYS and ARGV."""
    script = SCRIPTS[name]
    if script.num_keys >= 0 and len(keys) != script.num_keys:
        raise ValueError(f"{name} takes {script.num_keys} keys, got {len(keys)}")
    reply = run_packed(conn, name, ("EVALSHA", script.sha, len(keys), *keys, *args))
    if reply is not NOT_LOADED:
        return reply
    try:
        return conn.execute_command("EVAL", script.source, len(keys), *keys, *args)
    except Exception as exc:
        if _is_error_reply(exc):
            raise ScriptError(f"{name}: {exc}") from exc
        raise


NOT_LOADED = object()  # run_packed's answer when Redis has not loaded the script (a reply may be nil)


def run_packed(conn, name: str, command):
    """Script NAME's reply to COMMAND, its EVALSHA: an argument tuple, or bytes already packed as
    RESP (RawRedis.execute_packed); NOT_LOADED when Redis has not loaded the script (NOSCRIPT:
    run() then sends its source). Raise ScriptError."""
    try:
        if type(command) is bytes:
            return conn.execute_packed(command)
        return conn.execute_command(*command)
    except Exception as exc:
        if _is_noscript(exc):
            return NOT_LOADED
        if _is_error_reply(exc):
            raise ScriptError(f"{name}: {exc}") from exc
        raise
