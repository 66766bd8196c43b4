"""The contract of every Lua script, checked against its file name, its binding and the code table.

For each lua/NAME-NKEYS.lua (NAME-n.lua: a variable number of keys):
- its header opens with "NAME:", names its class of reply_codes and lists KEYS[1] ..
  KEYS[NKEYS], none beyond (an -n script names where its open range starts);
- its body names its keys at the top (``local x_key = KEYS[i]``) and uses no other literal
  KEYS index: a range is walked only through named bounds;
- script_calls has a function NAME, and that function sends exactly NKEYS keys (at least the
  fixed ones for -n), all in one Redis Cluster hash slot;
- every code the script returns as a literal is in reply_codes' table for it, and every code
  in the table is one it returns.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from redis.crc import key_slot

from tracker_core import reply_codes, script_calls, script_constants, scripts
from tracker_core.keys import ProjectKeys

FILES = sorted(scripts.LUA_DIR.glob("*.lua"))
K = ProjectKeys("contract")


def _parts(path):
    match = re.fullmatch(r"(?P<name>[a-z_]+)-(?P<keys>\d+|n)\.lua", path.name)
    text = path.read_text()
    end = text.index("\n]]\n")
    return match["name"], None if match["keys"] == "n" else int(match["keys"]), text[:end], text[end + 4 :]


def _code_only(lua: str) -> str:
    """LUA without comments and string contents (so a word in them is no keyword)."""
    # One pass, leftmost first: a quote inside a comment opens no string, and "--" inside a
    # string starts no comment.
    pattern = r"--\[\[.*?\]\]|--[^\n]*|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\""
    return re.sub(pattern, lambda m: "" if m[0].startswith("--") else "''", lua, flags=re.S)


def script_level_codes(body: str) -> set[int]:
    """The numbers the script itself returns first: `return N`, `return {N, ...}` outside any
    function (or `return reply` of a `local reply = {N, ...}`), and claim's `refuse(N, ...)`
    (a helper that returns {N, age})."""
    code = _code_only(body)
    codes: set[int] = set()
    stack: list[str] = []
    tokens = re.finditer(r"\b(function|if|do|repeat|end|until|return)\b|refuse\(\s*(-?\d+)", code)
    for token in tokens:
        word = token[1]
        if word is None:
            codes.add(int(token[2]))
        elif word == "function":
            stack.append("function")
        elif word in ("if", "do", "repeat"):
            stack.append("block")
        elif word in ("end", "until"):
            stack.pop()
        elif word == "return" and "function" not in stack:
            literal = re.match(r"\s*\{?\s*(-?\d+)\b", code[token.end() :])
            if literal:
                codes.add(int(literal[1]))
            # `return reply`, REPLY built as a table that opens with its code (claim)
            named = re.match(r"\s*([a-z_]\w*)\s*$", code[token.end() :].split("\n", 1)[0])
            built = named and re.search(rf"^local {named[1]} = \{{\s*(-?\d+)\b", code, flags=re.M)
            if built:
                codes.add(int(built[1]))
    assert not stack, "unbalanced blocks: the scan of the script is wrong"
    return codes


def test_every_script_has_a_file_binding_code_table_and_test():
    names = {_parts(path)[0] for path in FILES}
    assert names == set(scripts.SCRIPTS) == set(reply_codes.BY_SCRIPT)
    here = Path(__file__).parent
    for name in names:
        assert callable(getattr(script_calls, name)), name
        # test_NAME.py; test_NAME_script.py where tests/core has a test_NAME.py of the module
        assert (here / f"test_{name}.py").exists() or (here / f"test_{name}_script.py").exists(), name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_header_names_the_script_and_its_keys(path):
    name, num_keys, header, _body = _parts(path)
    assert header.startswith(f"--[[ {name}: ")
    assert f"reply_codes.{reply_codes.BY_SCRIPT[name].__name__} " in header, "the header names its code table"
    numbers = [int(n) for n in re.findall(r"KEYS\[(\d+)", header)]
    ends = [int(n) for n in re.findall(r"KEYS\[\d+\s*\.\.\s*(\d+)\]", header)]
    if num_keys is None:
        assert re.search(r"KEYS\[\d+\s*\.\.", header), "an -n script names where its open range starts"
    else:
        assert max(numbers + ends) == num_keys
        listed = set(numbers)
        for start, end in re.findall(r"KEYS\[(\d+)\s*\.\.\s*(\d+)\]", header):
            listed |= set(range(int(start), int(end) + 1))
        assert listed == set(range(1, num_keys + 1)), "every key is in the contract"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_body_names_its_keys_at_the_top(path):
    _name, num_keys, _header, body = _parts(path)
    code = _code_only(body)
    declared = re.findall(r"^local (\w+_key)\s*= KEYS\[(\d+)\]$", code, flags=re.M)
    assert declared, "the keys are named at the top"
    indexes = [int(i) for _, i in declared]
    assert len(set(indexes)) == len(indexes)
    if num_keys is not None:
        assert max(indexes) <= num_keys
    literal_uses = re.findall(r"KEYS\[\d+\]", code)
    assert len(literal_uses) == len(declared), "no literal KEYS index outside the declarations"
    first_use = min(code.index(f"local {name}") for name, _ in declared)
    last_declaration = max(code.index(f"local {name}") for name, _ in declared)
    assert "redis.call" not in code[first_use:last_declaration], "declared before any call"


class _Recorded(Exception):
    pass


class _Recorder:
    def __init__(self):
        self.command = None

    def execute_command(self, *args):
        self.command = args
        raise _Recorded


def _sample(name: str, annotation: str, parameters) -> object:
    """An argument for script_calls parameter NAME: a key of K where a key is expected (a
    queue named by its key; move_items' source is a key, the offload scripts' a queue name)."""
    if name.endswith("_key") or name in ("queue", "target", "counted"):
        return K.todo
    if name == "source" and "source_key" not in parameters:
        return K.backfeed
    special = {
        "tiers": ((600, 288, 172_800),),
        "chunk_keys": [K.bloom_chunk(0, 0)],
        "ks": [1],
        "hashed": [],
        "reasons": [],
        "domain_bytes": [],
        "seen": [True],
        "settings": {"title": "t"},
        "values": {"title": "t"},
    }
    if name in special:
        return special[name]
    if annotation.startswith("Sequence"):
        return ["https://example.com/a b?q=%20#x"]
    return {"int": 1, "str": "x", "bool": False, "dict": {"f": "v"}, "dict | None": None, "int | None": None}[
        annotation
    ]


def _sent(function) -> tuple:
    recorder = _Recorder()
    parameters = inspect.signature(function).parameters
    kwargs = {
        p.name: _sample(p.name, str(p.annotation), parameters)
        for p in parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }
    positional = [recorder] + ([K] if "k" in parameters else [])
    with pytest.raises(_Recorded):
        function(*positional, **kwargs)
    assert recorder.command[0] == "EVALSHA"
    return recorder.command


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_binding_sends_the_keys_of_the_contract_in_one_slot(path):
    name, num_keys, header, _body = _parts(path)
    command = _sent(getattr(script_calls, name))
    assert command[1] == scripts.SCRIPTS[name].sha
    sent = command[2]
    keys = command[3 : 3 + sent]
    if num_keys is None:
        fixed = int(re.search(r"KEYS\[(\d+)\s*\.\.", header)[1]) - 1
        assert sent >= fixed
    else:
        assert sent == num_keys
    assert len({key_slot(key.encode()) for key in keys}) == 1, keys


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_code_returned_is_in_the_table_and_back(path):
    name, _num_keys, _header, body = _parts(path)
    table = {int(code) for code in reply_codes.BY_SCRIPT[name]}
    assert script_level_codes(body) == table


def test_the_scan_finds_codes_only_at_script_level():
    body = """
local function room(v)
  if not v then return 0 end
  return 5
end
if x then return {-1, 0} end
for i = 1, 3 do
  if y then return -7 end
end
return {201, age}
"""
    assert script_level_codes(body) == {-1, -7, 201}
    built = "local reply = {200, age}\nif z then return refuse(429, 'f') end\nreturn reply\n"
    assert script_level_codes(built) == {200, 429}


def test_shared_constants_come_from_python_only():
    # A number both languages use is written once, in script_constants, and put into the script
    # as it loads; a Lua file that declared one itself could drift from Python.
    shared = {name for name in dir(script_constants) if name.isupper()}
    sources = [*FILES, *sorted((scripts.LUA_DIR / "includes").glob("*.lua"))]
    asked = set()
    for path in sources:
        text = path.read_text()
        declared = set(re.findall(r"^local ([A-Z][A-Z0-9_]*)\b", text, flags=re.M))
        assert not declared & shared, (path.name, declared & shared)
        for line in re.findall(r"^--@constants (.*)$", text, flags=re.M):
            asked |= set(line.split())
    assert asked <= shared
    for script in scripts.SCRIPTS.values():
        assert "--@" not in script.source
    assert "local RTT_BOUNDS_S = {1, 5, 15, " in scripts.SCRIPTS["done"].source
    assert f"local MINUTE_TTL_S = {script_constants.MINUTE_TTL_S}\n" in scripts.SCRIPTS["claim"].source


def test_a_script_asking_for_an_unknown_constant_fails_to_load():
    with pytest.raises(ValueError, match="NO_SUCH_NUMBER"):
        scripts._inline("--@constants UNPACK_CHUNK NO_SUCH_NUMBER\nreturn 1\n")
    assert (
        scripts._inline("--@constants UNPACK_CHUNK\n")
        == f"local UNPACK_CHUNK = {script_constants.UNPACK_CHUNK}\n"
    )
