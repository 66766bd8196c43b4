"""The contract of every Lua script, checked against its file name, its header and its binding.

For each lua/NAME-NKEYS.lua (NAME-n.lua: a variable number of keys):
- its header opens with "NAME:", names its codes (scripts.NAME.codes) and defines KEYS[1] ..
  KEYS[NKEYS], none beyond (an -n script names where its open range starts);
- its body names its keys at the top (``local x_key = KEYS[i]``) and uses no other literal
  KEYS index: a range is walked only through named bounds;
- tracker_core.scripts has a binding NAME whose KEYS and ARGV slots are, in order, the ones
  the header defines (each slot's label starts the header's text for it), whose run of extra
  keys or arguments is the header's, and whose call sends exactly NKEYS keys (at least the
  fixed ones for -n), all in one Redis Cluster hash slot;
- every code the script returns as a literal is in its binding's codes, and every code there
  is one it returns.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from redis.crc import key_slot

from tracker_core import scripts
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts import constants, loading
from tracker_core.scripts.binding import ProjectKey

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


def test_every_script_has_a_file_binding_and_test():
    names = {_parts(path)[0] for path in FILES}
    assert names == set(scripts.SCRIPTS) == set(scripts.BINDINGS)
    here = Path(__file__).parent
    for name in names:
        assert getattr(scripts, name) is scripts.BINDINGS[name]
        # test_NAME.py; test_NAME_script.py where tests/core has a test_NAME.py of the module
        assert (here / f"test_{name}.py").exists() or (here / f"test_{name}_script.py").exists(), name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_header_names_the_script_and_its_keys(path):
    name, num_keys, header, _body = _parts(path)
    assert header.startswith(f"--[[ {name}: ")
    assert f"scripts.{name}.codes " in header, "the header names its codes"
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


# A definition in a header: KEYS[i] or ARGV[i] at a line's start or after two spaces (prose that
# mentions one, "when ARGV[3] is not", has one space), or a run: KEYS[10...], ARGV[2 .. 1+D].
_DEFINITION = re.compile(r"(?:^|(?<=  ))(KEYS|ARGV)\[(\d+)(\s*\.\.[^\]]*)?\]", re.M)


def definitions(header: str) -> dict[tuple[str, int], tuple[bool, str]]:
    """(KEYS or ARGV, i) -> (whether a run starts there, the header's text up to the next
    definition, spaces folded), from each slot's first definition."""
    found: dict[tuple[str, int], tuple[bool, str]] = {}
    matches = list(_DEFINITION.finditer(header))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        text = header[match.end() : following.start() if following else len(header)]
        found.setdefault((match[1], int(match[2])), (match[3] is not None, " ".join(text.split())))
    return found


def _label(slot) -> str:
    """The words the header starts SLOT's text with: a ProjectKeys attribute's key name after
    the project's tag unless the binding says otherwise."""
    if isinstance(slot, ProjectKey) and slot.label is None:
        return slot.value(K, {})[len(K.tag) + 1 :]
    return slot.label


def _starts(text: str, label: str) -> bool:
    return re.match(re.escape(label) + r"(?!\w|:\S)", text) is not None


def _check_slots(kind: str, slots, more, defined: dict, header: str) -> None:
    for i, slot in enumerate(slots, 1):
        assert (kind, i) in defined, f"{kind}[{i}] is not in the header"
        run, text = defined[kind, i]
        assert not run, f"{kind}[{i}] starts a run in the header, a single slot in the binding"
        assert _starts(text, _label(slot)), f"{kind}[{i}]: {_label(slot)!r} does not start {text[:60]!r}"
    beyond = [i for (k, i) in defined if k == kind and i > len(slots) + 1]
    assert not beyond, f"the header defines {kind}{beyond}, the binding {len(slots)} and a run"
    after = defined.get((kind, len(slots) + 1))
    if more is None:
        assert after is None, f"the header defines {kind}[{len(slots) + 1}], the binding none"
    elif after is not None:
        assert _starts(after[1], more.label), f"{kind} run: {more.label!r} does not start {after[1][:60]!r}"
    else:  # a run the header names in prose ("then D pairs ...")
        assert more.label in " ".join(header.split()), f"{kind} run: {more.label!r} is not in the header"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_binding_declares_the_keys_and_arguments_of_the_header_in_order(path):
    name, _num_keys, header, _body = _parts(path)
    binding = scripts.BINDINGS[name]
    defined = definitions(header)
    _check_slots("KEYS", binding.key_slots, binding.more_keys, defined, header)
    _check_slots("ARGV", binding.arg_slots, binding.more_args, defined, header)


def test_the_header_parse_tells_definitions_from_prose():
    header = "KEYS[1] settings  KEYS[2] todo (set)\nKEYS[3..] streams\nARGV[1] now (ms)  ARGV[2...] pairs\n"
    header += "Returns -1 when ARGV[1] is not a number; KEYS[2] is left alone.\n"
    assert definitions(header) == {
        ("KEYS", 1): (False, "settings"),
        ("KEYS", 2): (False, "todo (set)"),
        ("KEYS", 3): (True, "streams"),
        ("ARGV", 1): (False, "now (ms)"),
        ("ARGV", 2): (True, "pairs Returns -1 when ARGV[1] is not a number; KEYS[2] is left alone."),
    }
    assert _starts("todo (set)", "todo") and not _starts("todo:backfeed set", "todo")


# A value for each binding keyword whose sample is not plain text: the keys the caller picks
# (a queue named by its key), lists, numbers the binding computes with.
SAMPLES = {
    "now_ms": 1_700_000_000_000,
    "queue": K.todo,
    "target": K.todo,
    "counted": K.limited_in,
    "source_key": K.todo,
    "queue_key": K.todo,
    "source": K.backfeed,
    "owners": ["o1", "o2"],
    "items": ["https://example.com/a b?q=%20#x", "two"],
    "held": ["", "limit\\0two"],
    "seen": [True, False],
    "chunk_keys": [K.bloom_chunk(0, 0)],
    "ks": [1],
    "hashed": [],
    "reasons": [],
    "domain_bytes": ["example.com", 5],
    "tiers": ((600, 288, 172_800),),
    "settings": {"title": "t"},
    "values": {"title": "t"},
    "expected": {"title": ""},
    "blocked": [],
    "own_read": [],
    "copy_read": [],
    "own": ["ip:10.0.0.1"],
    "copy": [],
    "index": ["p410000001"],
    "minute": 28_333_333,
    "hour": 472_222,
    "day": 19_675,
    "below": None,
    "release": False,
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_binding_sends_the_keys_of_the_contract_in_one_slot(path):
    name, num_keys, _header, _body = _parts(path)
    binding = scripts.BINDINGS[name]
    keys = binding.keys(K, **{param: SAMPLES.get(param, "x") for param in binding.params})
    if num_keys is None:
        assert len(keys) >= len(binding.key_slots)
    else:
        assert len(keys) == num_keys
    assert len({key_slot(key.encode()) for key in keys}) == 1, keys


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_code_returned_is_in_the_codes_and_back(path):
    name, _num_keys, _header, body = _parts(path)
    assert script_level_codes(body) == {int(code) for code in scripts.BINDINGS[name].codes}


def test_a_binding_refuses_a_keyword_it_does_not_know_or_misses():
    with pytest.raises(TypeError, match="wanted"):
        scripts.claim.argv(K, now_ms=0, downloader="d", ip="")
    with pytest.raises(TypeError, match="wantd"):
        scripts.claim.argv(K, now_ms=0, downloader="d", ip="", wanted=1, wantd=1)


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
    # A number both languages use is written once, in scripts/constants.py, and put into the script
    # as it loads; a Lua file that declared one itself could drift from Python.
    shared = {name for name in dir(constants) if name.isupper()}
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
    assert f"local MINUTE_TTL_S = {constants.MINUTE_TTL_S}\n" in scripts.SCRIPTS["claim"].source


def test_a_script_asking_for_an_unknown_constant_fails_to_load():
    with pytest.raises(ValueError, match="NO_SUCH_NUMBER"):
        loading.inline("--@constants UNPACK_CHUNK NO_SUCH_NUMBER\nreturn 1\n")
    assert loading.inline("--@constants UNPACK_CHUNK\n") == f"local UNPACK_CHUNK = {constants.UNPACK_CHUNK}\n"
