"""Classify item names against limit patterns: the readable twin of _classify_c.pyx.

A pattern is a string `KIND:VALUE`:
- `type:user`        the item type, the text before the first ':' (`user:alice` -> `user`);
- `prefix:TEXT`      names that start with TEXT;
- `domain:NAME`      names whose host is NAME or a subdomain of it (URLs, or bare `host/path`);
- `regex:EXPR`       names where the regular expression EXPR is found (`re.search`).

`classify(name)` answers the index of the FIRST pattern in the list that matches, or -1: the list
order is the admins' priority order, and "first in the list" is defined over all patterns, so the
order in which the fast forms are tried cannot change the answer.

The tables are built here and shared by the compiled class, so both index patterns identically;
only the per-name walk differs.
"""
from __future__ import annotations

import re

try:  # Python 3.11+: the parser moved under re.
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover
    import sre_constants  # type: ignore
    import sre_parse  # type: ignore

KINDS = ("type", "prefix", "domain", "regex")
TERMINALS = -1  # trie node key holding [(index, compiled regex or None), ...]
NO_MATCH = -1
MAX_PATTERN_LENGTH = 1000


class PatternError(ValueError):
    """A pattern that cannot be used; the message is one line for the admin."""


def parse_pattern(pattern: str) -> tuple[str, str]:
    """Split `KIND:VALUE` and check it; raise PatternError with a one-line reason."""
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
    if kind == "regex":
        try:
            re.compile(value)
        except (re.error, RecursionError, OverflowError) as exc:
            raise PatternError(f"bad regular expression: {exc}".splitlines()[0]) from None
    return kind, value


def normalize_domain(value: str) -> str:
    """Lower-case a domain and drop a leading `*.` or `.` (both mean "and its subdomains")."""
    value = value.strip().lower()
    value = value.removeprefix("*.")
    return value.lstrip(".")


def anchored_literal_prefix(expression: str) -> str:
    """Return the literal text a regex must start the name with, or '' when there is none.

    `^user:[0-9]+` -> `user:`. Such regexes go into the prefix trie, so they cost nothing for
    names that do not start with the literal; only names that do are tried against the regex.
    """
    try:
        parsed = sre_parse.parse(expression)
    except Exception:  # noqa: BLE001 - compile already accepted it; be conservative
        return ""
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE):
        return ""
    items = list(parsed)
    if not items or items[0] != (sre_constants.AT, sre_constants.AT_BEGINNING) and \
            items[0] != (sre_constants.AT, sre_constants.AT_BEGINNING_STRING):
        return ""
    literal = []
    for op, arg in items[1:]:
        if op is not sre_constants.LITERAL:
            break
        literal.append(chr(arg))
    return "".join(literal)


def required_literal(expression: str) -> str:
    """Return the longest literal run every match must contain ('' when none is known).

    Top-level items of a regex are all mandatory, so a run of top-level literals must appear in
    the name; `literal in name` is a fast C substring search that rejects most names before the
    regex engine runs.
    """
    try:
        parsed = sre_parse.parse(expression)
    except Exception:  # noqa: BLE001
        return ""
    if parsed.state.flags & re.IGNORECASE:
        return ""
    best, run = "", []
    for op, arg in list(parsed) + [(None, None)]:
        if op is sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    return best


def build_tables(patterns):
    """Index PATTERNS into (types, domains, trie, others) for the per-name walk.

    types, domains: dict value -> lowest index; trie: nested dicts keyed by code point, with
    TERMINALS -> [(index, regex or None)] where a prefix (or a regex's literal prefix) ends;
    others: [(index, required literal, compiled regex)] in index order.
    """
    types: dict[str, int] = {}
    domains: dict[str, int] = {}
    trie: dict = {}
    others = []
    for index, pattern in enumerate(patterns):
        kind, value = parse_pattern(pattern)
        if kind == "type":
            types.setdefault(value, index)
        elif kind == "domain":
            domains.setdefault(value, index)
        elif kind == "prefix":
            _trie_insert(trie, value, index, None)
        else:
            compiled = re.compile(value)
            prefix = anchored_literal_prefix(value)
            if prefix:
                _trie_insert(trie, prefix, index, compiled)
            else:
                others.append((index, required_literal(value), compiled))
    return types, domains, trie, others


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
        host = host[at + 1:]
    colon = host.find(":")
    if colon >= 0:
        host = host[:colon]
    return host.lower()


class Classifier:
    """Classify names against a fixed list of patterns (see the module docstring)."""

    def __init__(self, patterns):
        self.patterns = list(patterns)
        self.types, self.domains, self.trie, self.others = build_tables(self.patterns)

    def __len__(self):
        return len(self.patterns)

    def classify(self, name: str) -> int:
        """Return the index of the first pattern NAME matches, or -1."""
        best = len(self.patterns)
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
                host = host[dot + 1:]
        node = self.trie
        i, n = 0, len(name)
        while node:
            terminals = node.get(TERMINALS)
            if terminals is not None:
                for index, regex in terminals:
                    if index < best and (regex is None or regex.search(name) is not None):
                        best = index
            if i >= n:
                break
            node = node.get(ord(name[i]))
            i += 1
        for index, literal, regex in self.others:
            if index >= best:
                break
            if literal in name and regex.search(name) is not None:
                best = index
        return best if best < len(self.patterns) else NO_MATCH

    def classify_many(self, names) -> list:
        """Return classify(name) for each of NAMES, in order."""
        classify = self.classify
        return [classify(name) for name in names]
