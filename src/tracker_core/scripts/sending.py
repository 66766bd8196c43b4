"""Load the Lua scripts of ``lua/`` and run them by SHA, reloading on NOSCRIPT.

Each file is ``NAME-NKEYS.lua`` and opens with its contract; ``NAME-n.lua`` takes a variable
number of keys (the Bloom filter's bitmaps), all still passed in KEYS. A line ``--@include FILE`` is replaced
by ``lua/includes/FILE.lua`` at load time, so shared pieces are written once, and a line
``--@constants NAME ...`` by ``local NAME = <value>`` from tracker_core.script_constants, so the
numbers Python also uses are written once. Callers use tracker_core.script_calls, which knows
each script's KEYS and ARGV; ``run`` is its one way to Redis.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tracker_core import script_constants

LUA_DIR = Path(__file__).with_name("lua")
_INCLUDE_RE = re.compile(r"^--@include (\w+)\s*$", re.M)
_CONSTANTS_RE = re.compile(r"^--@constants((?: +[A-Z][A-Z0-9_]*)+) *$", re.M)
_NAME_RE = re.compile(r"(?P<name>[a-z_]+)-(?P<keys>\d+|n)\.lua\Z")


class ScriptError(Exception):
    """A script failed inside Redis (a bug or a broken data structure)."""


@dataclass(frozen=True)
class Script:
    name: str
    num_keys: int
    source: str
    sha: str


def _constants(names: str) -> str:
    lines = []
    for name in names.split():
        if not hasattr(script_constants, name):
            raise ValueError(f"--@constants {name}: no such name in tracker_core.script_constants")
        lines.append(f"local {name} = {script_constants.lua_value(getattr(script_constants, name))}")
    return "\n".join(lines)


def _inline(source: str) -> str:
    source = _INCLUDE_RE.sub(lambda m: (LUA_DIR / "includes" / f"{m[1]}.lua").read_text(), source)
    return _CONSTANTS_RE.sub(lambda m: _constants(m[1]), source)


def load_scripts() -> dict[str, Script]:
    scripts = {}
    for path in sorted(LUA_DIR.glob("*.lua")):
        match = _NAME_RE.match(path.name)
        if not match:
            raise ValueError(f"script file {path.name} is not named NAME-NKEYS.lua")
        source = _inline(path.read_text())
        num_keys = -1 if match["keys"] == "n" else int(match["keys"])
        scripts[match["name"]] = Script(
            match["name"], num_keys, source, hashlib.sha1(source.encode()).hexdigest()
        )
    return scripts


SCRIPTS = load_scripts()


def _is_noscript(exc: Exception) -> bool:
    # redis-py raises NoScriptError with its own message; the raw connection passes Redis's text.
    return type(exc).__name__ == "NoScriptError" or str(exc).startswith("NOSCRIPT")


def _is_error_reply(exc: Exception) -> bool:
    # Both clients raise their own error types for a Redis error reply; their subclasses
    # (a lost connection, an unknown outcome) are raised as they are.
    return type(exc).__name__ in ("RedisError", "ResponseError")


def run(conn, name: str, keys, args):
    """Run script NAME on CONN (RawRedis or redis-py) with KEYS and ARGV; raise ScriptError."""
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
    RESP (RawRedis.execute_packed, see tracker_core.packed_calls); NOT_LOADED when Redis has not
    loaded the script (NOSCRIPT: run() then sends its source). Raise ScriptError."""
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
