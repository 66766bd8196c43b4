"""Classify item names against limit patterns: the readable twin of _classify_c.pyx.

A pattern is a string `KIND:VALUE`:
- `type:user`        the item type, the text before the first ':' (`user:alice` -> `user`);
- `prefix:TEXT`      names that start with TEXT;
- `domain:NAME`      names whose host is NAME or a subdomain of it (URLs, or bare `host/path`);
- `regex:EXPR`       names where the regular expression EXPR is found, in RE2 syntax.

Regexes run on RE2 (google-re2), whose time is linear in the name's length whatever the pattern:
a backtracking engine takes seconds on a 47-character name against `^https?://a\\.com/(\\w+/?)*$`
and doubles per character, and names reach classification from backfeed (crawled pages). A
pattern RE2 cannot run (backreferences, lookaround, `\\Z`) is refused when the limit is added.

`classify(name)` answers the index of the FIRST pattern in the list that matches, or -1: the list
order is the admins' priority order, and "first in the list" is defined over all patterns, so the
order in which the fast forms are tried cannot change the answer.

The tables are built here and shared by the compiled class, so both index patterns identically
and run the very same compiled regexes; only the per-name walk differs.
"""

from __future__ import annotations

import re

from re2 import _re2

KINDS = ("type", "prefix", "domain", "regex")
TERMINALS = -1  # trie node key holding [(index, compiled regex or None), ...]
NO_MATCH = -1
MAX_PATTERN_LENGTH = 1000
# RE2's compiled program size bounds the work per byte of a name (and a DFA state's size); a
# 30-character URL regex takes about 30, a Unicode class such as \pL about 1,200.
MAX_REGEX_PROGRAM = 5000
# Memory one regex may use for its cached DFA states, per process. A lazily built DFA stays far
# below this for ordinary patterns; past it RE2 drops its cache and goes on (still linear).
REGEX_MAX_MEM = 2 << 20
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED


class PatternError(ValueError):
    """A pattern that cannot be used; the message is one line for the admin."""


def _regex_options(max_mem: int = REGEX_MAX_MEM):
    options = _re2.RE2.Options()
    options.never_capture = True  # only "does it match" is asked: no submatch tracking
    options.log_errors = False  # a refused pattern is answered, not logged by RE2
    options.max_mem = max_mem
    return options


def _encode_pattern(expression: str) -> bytes:
    try:
        return expression.encode("utf-8")
    except UnicodeEncodeError:
        raise PatternError("bad regular expression: not valid UTF-8") from None


def check_regex(expression: str) -> None:
    """Raise PatternError (one line) unless RE2 runs EXPRESSION within the program bound."""
    regexp = _re2.RE2(_encode_pattern(expression), _regex_options())
    if not regexp.ok():
        reason = regexp.error().decode("utf-8", "replace")
        raise PatternError(" ".join(f"bad regular expression (RE2 syntax): {reason}".split()))
    if regexp.ProgramSize() > MAX_REGEX_PROGRAM:
        raise PatternError(
            f"regular expression too complex (RE2 program of {regexp.ProgramSize()}"
            f" steps; at most {MAX_REGEX_PROGRAM})"
        )


def compile_regexes(expressions: list, max_mem: int = REGEX_MAX_MEM):
    """Return one RE2 set matching EXPRESSIONS (already checked) in a single pass, or None.

    `set.Match(utf8_bytes)` lists the positions in EXPRESSIONS of those found in the text. A set
    runs on RE2's DFA alone; its Compile fails (None here) when the DFA could not run within
    MAX_MEM, so a compiled set never fails at match time.
    """
    regex_set = _re2.Set(_UNANCHORED, _regex_options(max_mem))
    for expression in expressions:
        if regex_set.Add(_encode_pattern(expression)) < 0:
            return None
    return regex_set if regex_set.Compile() else None


def compile_regex(expression: str):
    """Check EXPRESSION and return its single-pattern RE2 set (see compile_regexes)."""
    check_regex(expression)
    compiled = compile_regexes([expression])
    if compiled is None:
        raise PatternError("regular expression too complex for RE2's memory bound")
    return compiled


def name_bytes(name: str) -> bytes:
    """The bytes RE2 reads for NAME: UTF-8, a lone surrogate kept as its 3 bytes (never raises)."""
    return name.encode("utf-8", "surrogatepass")


def parse_pattern(pattern: str) -> tuple[str, str]:
    """Split `KIND:VALUE` and check it; raise PatternError with a one-line reason."""
    kind, value, _ = _parse(pattern)
    return kind, value


def _parse(pattern: str) -> tuple[str, str, object]:
    """parse_pattern, also returning the compiled regex of a `regex:` pattern (else None)."""
    if not isinstance(pattern, str):
        raise PatternError("pattern must be a string")
    kind, sep, value = pattern.partition(":")
    if not sep or kind not in KINDS:
        raise PatternError(f"pattern must start with one of {', '.join(k + ':' for k in KINDS)}")
    if not value:
        raise PatternError("pattern value is empty")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    if kind == "type" and ":" in value:
        raise PatternError("an item type cannot contain ':'")
    if kind == "domain":
        value = normalize_domain(value)
        if not value or any(ch in value for ch in "/?#:@"):
            raise PatternError("a domain is a host name like example.com")
    compiled = compile_regex(value) if kind == "regex" else None
    return kind, value, compiled


def normalize_domain(value: str) -> str:
    """Lower-case a domain and drop a leading `*.` or `.` (both mean "and its subdomains")."""
    value = value.strip().lower()
    value = value.removeprefix("*.")
    return value.lstrip(".")


# -- literal analysis: which names can a regex match at all? -----------------------------------
#
# A conservative reading of RE2 syntax, only as far as the prefilters need: the regex's
# top-level items, each a literal character or "something else". Anything not understood for
# sure turns into "something else" (a shorter literal: slower, never wrong); a top-level `|`, a
# case-insensitive flag or `\Q...\E` give up on literals altogether.

_METACHARS = frozenset("\\.+*?()|[]{}^$")
_REPEAT_RE = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")  # RE2 reads any other '{' as a literal
_FLAGS_RE = re.compile(r"\(\?([imsU-]*)[:)]")
_OCTAL = "01234567"
LITERAL, BEGIN, OTHER = "literal", "begin", "other"


def _escape_end(expression: str, i: int) -> int:
    """The index after the escape sequence starting at expression[i] == '\\\\'."""
    n = len(expression)
    kind = expression[i + 1] if i + 1 < n else ""
    if kind in "xpP" and expression.startswith("{", i + 2):
        end = expression.find("}", i + 3)
        return n if end < 0 else end + 1
    if kind == "x":
        return min(n, i + 4)
    if kind in "pP":
        return min(n, i + 3)
    if kind and kind in _OCTAL:
        j = i + 2
        while j < n and j < i + 4 and expression[j] in _OCTAL:
            j += 1
        return j
    return min(n, i + 2)


def _class_end(expression: str, i: int) -> int | None:
    """The index after the character class starting at expression[i] == '[' (None: unsure)."""
    n, j = len(expression), i + 1
    if j < n and expression[j] == "^":
        j += 1
    if j < n and expression[j] == "]":  # a ']' first in a class is a literal
        j += 1
    while j < n:
        ch = expression[j]
        if ch == "\\":
            j = _escape_end(expression, j)
        elif ch == "[" and expression.startswith(":", j + 1):
            end = expression.find(":]", j + 2)
            j = j + 1 if end < 0 else end + 2
        elif ch == "]":
            return j + 1
        else:
            j += 1
    return None


def top_level_items(expression: str) -> list | None:
    """The regex's top-level items: (LITERAL, char), (BEGIN, '^') or (OTHER, ''); None when
    literals cannot be relied on (top-level alternation, case-insensitive flag, \\Q...\\E).

    An item followed by a repetition counts as OTHER (it may be absent or repeated).
    """
    if "\\Q" in expression:
        return None
    for flags in _FLAGS_RE.findall(expression):
        if "i" in flags.partition("-")[0]:
            return None
    items: list = []
    depth, i, n = 0, 0, len(expression)
    while i < n:
        ch = expression[i]
        item = (OTHER, "")
        if ch == "\\":
            nxt = expression[i + 1] if i + 1 < n else ""
            end = _escape_end(expression, i)
            if nxt and nxt.isascii() and not nxt.isalnum():
                item = (LITERAL, nxt)  # an escaped punctuation mark is itself
            i = end
        elif ch == "[":
            class_end = _class_end(expression, i)
            if class_end is None:
                return None
            i = class_end
        elif ch == "(":
            depth += 1
            if depth > 1:
                i += 1
                continue
            i += 1
        elif ch == ")":
            depth -= 1
            i += 1
            continue  # the group was recorded at its '('
        elif ch == "|" and depth == 0:
            return None
        elif ch in "*+?" or (ch == "{" and _REPEAT_RE.match(expression, i)):
            repeat = _REPEAT_RE.match(expression, i) if ch == "{" else None
            i = repeat.end() if repeat else i + 1
            if depth == 0 and items:
                items[-1] = (OTHER, "")
            continue
        elif ch == "^":
            item = (BEGIN, "^")
            i += 1
        elif ch in _METACHARS:
            i += 1
        else:
            item = (LITERAL, ch)
            i += 1
        if depth == 0 or (ch == "(" and depth == 1):
            items.append(item)
    return items


def anchored_literal_prefix(expression: str) -> str:
    """Return the literal text a regex must start the name with, or '' when there is none.

    `^user:[0-9]+` -> `user:`. Such regexes go into the prefix trie, so they cost nothing for
    names that do not start with the literal; only names that do are tried against the regex.
    """
    items = top_level_items(expression)
    if not items or items[0][0] != BEGIN:
        return ""
    if any("m" in flags.partition("-")[0] for flags in _FLAGS_RE.findall(expression)):
        return ""  # (?m): '^' also matches after a newline
    literal = []
    for kind, ch in items[1:]:
        if kind != LITERAL:
            break
        literal.append(ch)
    return "".join(literal)


def required_literal(expression: str) -> str:
    """Return the longest literal run every match must contain ('' when none is known).

    Top-level items of a regex are all mandatory, so a run of top-level literals must appear in
    the name; `literal in name` is a fast C substring search that rejects most names before the
    regex engine runs.
    """
    best, run = "", []
    for kind, ch in (top_level_items(expression) or []) + [(OTHER, "")]:
        if kind == LITERAL:
            run.append(ch)
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    return best


def build_tables(patterns):
    """Index PATTERNS into (types, domains, trie, others, unfiltered) for the per-name walk.

    types, domains: dict value -> lowest index; trie: nested dicts keyed by code point, with
    TERMINALS -> [(index, regex or None)] where a prefix (or a regex's literal prefix) ends;
    others: [(index, required literal, regex)] in index order, for regexes with a literal;
    unfiltered: [(indices, regex set)], the regexes without any literal, tried on every name in
    one RE2 pass (several sets only when one would not fit RE2's memory bound).
    A regex is an RE2 set: `regex.Match(name_bytes(name))` is a non-empty list when it matches.
    A pattern of None (a stored limit that can no longer be used) matches nothing.
    """
    types: dict[str, int] = {}
    domains: dict[str, int] = {}
    trie: dict = {}
    others = []
    bare = []  # (index, expression) of regexes with no literal at all
    for index, pattern in enumerate(patterns):
        if pattern is None:
            continue
        kind, value, compiled = _parse(pattern)
        if kind == "type":
            types.setdefault(value, index)
        elif kind == "domain":
            domains.setdefault(value, index)
        elif kind == "prefix":
            _trie_insert(trie, value, index, None)
        else:
            prefix = anchored_literal_prefix(value)
            literal = "" if prefix else required_literal(value)
            if prefix:
                _trie_insert(trie, prefix, index, compiled)
            elif literal:
                others.append((index, literal, compiled))
            else:
                bare.append((index, value, compiled))
    return types, domains, trie, others, _group_unfiltered(bare)


def _group_unfiltered(bare: list) -> list:
    if not bare:
        return []
    combined = compile_regexes([value for _, value, _ in bare], min(64 << 20, REGEX_MAX_MEM * len(bare)))
    if combined is not None:
        return [([index for index, _, _ in bare], combined)]
    return [([index], compiled) for index, _, compiled in bare]


def _trie_insert(trie: dict, text: str, index: int, regex) -> None:
    node = trie
    for ch in text:
        node = node.setdefault(ord(ch), {})
    node.setdefault(TERMINALS, []).append((index, regex))


def host_of(name: str) -> str:
    """Return the lower-cased host of a URL or bare `host/path` name ('' when it has none)."""
    start = name.find("://")
    start = 0 if start < 0 else start + 3
    end = len(name)
    for i in range(start, end):
        if name[i] in "/?#":
            end = i
            break
    host = name[start:end]
    at = host.rfind("@")
    if at >= 0:
        host = host[at + 1 :]
    colon = host.find(":")
    if colon >= 0:
        host = host[:colon]
    return host.lower()


class Classifier:
    """Classify names against a fixed list of patterns (see the module docstring)."""

    def __init__(self, patterns):
        self.patterns = list(patterns)
        self.types, self.domains, self.trie, self.others, self.unfiltered = build_tables(self.patterns)

    def __len__(self):
        return len(self.patterns)

    def classify(self, name: str) -> int:
        """Return the index of the first pattern NAME matches, or -1."""
        best = len(self.patterns)
        data = None  # the name's UTF-8 bytes, made once the first regex needs them
        if self.types:
            colon = name.find(":")
            if colon > 0:
                best = min(best, self.types.get(name[:colon], best))
        if self.domains:
            host = host_of(name)
            while host:
                best = min(best, self.domains.get(host, best))
                dot = host.find(".")
                if dot < 0:
                    break
                host = host[dot + 1 :]
        node = self.trie
        i, n = 0, len(name)
        while node:
            terminals = node.get(TERMINALS)
            if terminals is not None:
                for index, regex in terminals:
                    if index >= best:
                        continue
                    if regex is None:
                        best = index
                        continue
                    if data is None:
                        data = name_bytes(name)
                    if regex.Match(data):
                        best = index
            if i >= n:
                break
            node = node.get(ord(name[i]))
            i += 1
        for index, literal, regex in self.others:
            if index >= best:
                break
            if literal in name:
                if data is None:
                    data = name_bytes(name)
                if regex.Match(data):
                    best = index
        for indices, regex_set in self.unfiltered:
            if indices[0] >= best:
                continue
            if data is None:
                data = name_bytes(name)
            for position in regex_set.Match(data):
                best = min(best, indices[position])
        return best if best < len(self.patterns) else NO_MATCH

    def classify_many(self, names) -> list:
        """Return classify(name) for each of NAMES, in order."""
        classify = self.classify
        return [classify(name) for name in names]
