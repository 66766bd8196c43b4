"""The Lua files of ``tracker_core/lua/``, read and made ready to send: one Script per file.

Each file is ``NAME-NKEYS.lua`` and opens with its contract; ``NAME-n.lua`` takes a variable
number of keys (the Bloom filter's bitmaps), all still passed in KEYS. A line ``--@include FILE``
is replaced by ``lua/includes/FILE.lua`` at load time, so shared pieces are written once, and a
line ``--@constants NAME ...`` by ``local NAME = <value>`` from tracker_core.scripts.constants, so
the numbers Python also uses are written once. The SHA covers the inlined text, so a change to
an include or a constant is a new script to Redis.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tracker_core.scripts import constants

LUA_DIR = Path(__file__).parent.parent / "lua"
_INCLUDE_RE = re.compile(r"^--@include (\w+)\s*$", re.M)
_CONSTANTS_RE = re.compile(r"^--@constants((?: +[A-Z][A-Z0-9_]*)+) *$", re.M)
NAME_RE = re.compile(r"(?P<name>[a-z_]+)-(?P<keys>\d+|n)\.lua\Z")


@dataclass(frozen=True)
class Script:
    name: str
    num_keys: int  # -1: any number (a NAME-n.lua)
    source: str
    sha: str


def _constants(names: str) -> str:
    lines = []
    for name in names.split():
        if not hasattr(constants, name):
            raise ValueError(f"--@constants {name}: no such name in tracker_core.scripts.constants")
        lines.append(f"local {name} = {constants.lua_value(getattr(constants, name))}")
    return "\n".join(lines)


def inline(source: str) -> str:
    """SOURCE with its --@include and --@constants lines replaced."""
    source = _INCLUDE_RE.sub(lambda m: (LUA_DIR / "includes" / f"{m[1]}.lua").read_text(), source)
    return _CONSTANTS_RE.sub(lambda m: _constants(m[1]), source)


def load_scripts() -> dict[str, Script]:
    scripts = {}
    for path in sorted(LUA_DIR.glob("*.lua")):
        match = NAME_RE.match(path.name)
        if not match:
            raise ValueError(f"script file {path.name} is not named NAME-NKEYS.lua")
        source = inline(path.read_text())
        num_keys = -1 if match["keys"] == "n" else int(match["keys"])
        scripts[match["name"]] = Script(
            match["name"], num_keys, source, hashlib.sha1(source.encode()).hexdigest()
        )
    return scripts


SCRIPTS = load_scripts()
