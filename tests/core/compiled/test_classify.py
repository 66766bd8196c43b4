"""Pattern classification: each form's rule, first-in-list priority, and twin == compiled."""

import re

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from support import twins

compiled, pure = twins.pair("classify")

IMPLEMENTATIONS = pytest.mark.parametrize("impl", [pure, compiled], ids=["pure", "compiled"])


def test_compiled_module_is_the_one_in_use():
    twins.in_use_matches_environment("classify")


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    "pattern,name,matches",
    [
        ("type:user", "user:alice", True),
        ("type:user", "users:alice", False),
        ("type:user", "user", False),
        ("type:user", ":user:x", False),
        ("prefix:http://a.com/x", "http://a.com/xyz", True),
        ("prefix:http://a.com/x", "http://a.com/", False),
        ("domain:Example.com", "https://www.example.com/p", True),
        ("domain:example.com", "HTTPS://WWW.EXAMPLE.COM/P", True),
        ("domain:*.example.com", "example.com/a", True),
        ("domain:example.com", "http://u:pw@deep.sub.example.com:8080/x?q#f", True),
        ("domain:example.com", "http://notexample.com/", False),
        ("domain:example.com", "http://example.com.evil.net/", False),
        ("domain:example.com", "http://evil.net/example.com", False),
        ("regex:^user:[0-9]+$", "user:123", True),
        ("regex:^user:[0-9]+$", "user:12a", False),
        ("regex:foo\\d+bar", "xxfoo12bar", True),
        ("regex:foo\\d+bar", "xxfoobar", False),
        ("regex:(?i)^ABC", "abcdef", True),
        ("regex:(?m)^abc", "x\nabc", True),
        ("regex:a|^zz", "zzz", True),
        ("regex:.", "anything", True),
    ],
)
def test_each_form_matches_by_its_rule(impl, pattern, name, matches):
    assert impl.Classifier([pattern]).classify(name) == (0 if matches else -1)


@IMPLEMENTATIONS
def test_first_pattern_in_the_list_wins_whatever_its_form(impl):
    patterns = ["regex:alice$", "prefix:user:al", "domain:a.org", "type:user", "regex:^user:"]
    c = impl.Classifier(patterns)
    assert c.classify("user:alice") == 0
    assert c.classify("user:alex") == 1
    assert c.classify("user:bob") == 3
    assert c.classify_many(["user:alice", "http://a.org/", "bob"]) == [0, 2, -1]
    assert impl.Classifier(list(reversed(patterns))).classify("user:alice") == 0


@IMPLEMENTATIONS
def test_no_patterns_classify_nothing(impl):
    c = impl.Classifier([])
    assert len(c) == 0
    assert c.classify_many(["a", "", "user:x"]) == [-1, -1, -1]


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    "pattern",
    [
        "user",
        "kind:x",
        "type:",
        "type:a:b",
        "regex:(",
        "domain:a.com/x",
        "domain:*.",
        "prefix:",
        "regex:" + "a" * 1000,
        7,
    ],
)
def test_bad_patterns_are_refused_with_a_reason(impl, pattern):
    with pytest.raises(pure.PatternError) as info:
        impl.Classifier([pattern])
    assert str(info.value) and "\n" not in str(info.value)


def test_literal_analysis_feeds_the_fast_paths():
    assert pure.anchored_literal_prefix("^user:[0-9]+") == "user:"
    assert pure.anchored_literal_prefix("user:") == ""
    assert pure.anchored_literal_prefix("(?i)^user") == ""
    assert pure.anchored_literal_prefix("^ab*") == "a"
    assert pure.required_literal("x[0-9]/tags/[a-z]+") == "/tags/"
    assert pure.required_literal("(?i)abc") == ""


@pytest.mark.parametrize(
    "expression,prefix,literal",
    [
        ("[[:alpha:]]x", "", "x"),  # Python's parser reads ']x' here: wrong for RE2
        ("^[]a]bc", "", "bc"),
        ("^a{,3}b", "a", ",3"),  # RE2 reads "{,3}" as text; "{" counts as unknown
        ("\\x41bc", "", "bc"),
        ("^\\141bc", "", "bc"),
        ("\\p{Greek}xy", "", "xy"),
        ("^\\Qa.b\\E", "", ""),
        ("a(?i)bc", "", ""),
        ("(?m)^abc", "", "abc"),
        ("^ab|cd", "", ""),
        ("^(?:ab|cd)ef", "", "ef"),
        ("^https?://example\\.com/(\\w+/?)*$", "http", "://example.com/"),
    ],
)
def test_literal_analysis_reads_re2_syntax_conservatively(expression, prefix, literal):
    assert pure.anchored_literal_prefix(expression) == prefix
    assert pure.required_literal(expression) == literal


def reference(patterns, name):
    """Classify by brute force: the first pattern whose regex RE2 finds (its own `search`)."""
    for index, pattern in enumerate(patterns):
        kind, value = pure.parse_pattern(pattern)
        if kind == "type":
            hit = name.split(":", 1)[0] == value and ":" in name
        elif kind == "prefix":
            hit = name.startswith(value)
        elif kind == "domain":
            host = pure.host_of(name)
            hit = host == value or host.endswith("." + value)
        else:
            hit = re2.search(value, name) is not None
        if hit:
            return index
    return -1


ALPHABET = "ab:/.@?#uxé1"
fragments = st.text(alphabet=ALPHABET, min_size=1, max_size=6)
patterns_st = st.lists(
    st.one_of(
        fragments.filter(lambda s: ":" not in s).map(lambda s: "type:" + s),
        fragments.map(lambda s: "prefix:" + s),
        st.sampled_from(["a", "a.b", "xa.b", "u", "é.a"]).map(lambda s: "domain:" + s),
        fragments.map(lambda s: "regex:^" + re.escape(s) + "[a-z]*"),
        fragments.map(lambda s: "regex:" + re.escape(s) + "(?:b|x)?"),
        fragments.map(lambda s: "regex:" + re.escape(s)),
        st.sampled_from(["regex:b+1", "regex:^.?a", "regex:[ux]{2}", "regex:(?i)A:"]),
    ),
    max_size=25,
)
names_st = st.lists(
    st.text(alphabet=ALPHABET, max_size=20) | st.builds(lambda h, p: f"http://{h}/{p}", fragments, fragments),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(patterns_st, names_st)
def test_compiled_and_twin_agree_with_brute_force(patterns, names):
    expected = [reference(patterns, name) for name in names]
    assert pure.Classifier(patterns).classify_many(names) == expected
    assert compiled.Classifier(patterns).classify_many(names) == expected


# Pieces of RE2 syntax whose literal reading is easy to get wrong: POSIX classes, braces that are
# text, escapes, groups with alternation, quantifiers and flags. Joined at random, the regexes
# that RE2 accepts must classify exactly as RE2's own search finds them, through every fast path.
RE2_PIECES = [
    "a",
    "b",
    ":",
    "/",
    "u",
    "é",
    "\\.",
    "\\?",
    "#",
    "[[:alpha:]]",
    "[]a]",
    "[^a]",
    "\\x61",
    "\\141",
    "\\pL",
    "{,2}",
    "{",
    "}",
    "]",
    "{2}",
    "(?:a|b)",
    "(a|u)+",
    "\\b",
    "$",
    ".",
    "(?i:a)",
    "\\Qa.\\E",
    "*",
    "+?",
    "?",
    "\\z",
    "(?s).",
    "|",
    "x{1,2}",
]
re2_regexes = st.lists(st.sampled_from(RE2_PIECES), min_size=1, max_size=7).map(
    lambda pieces: "".join(pieces)
) | st.lists(st.sampled_from(RE2_PIECES), max_size=6).map(lambda pieces: "^" + "".join(pieces))
NAME_ALPHABET = ALPHABET + "{},2]A"


def usable(expression):
    try:
        pure.parse_pattern("regex:" + expression)
    except pure.PatternError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(
    st.lists(re2_regexes.filter(usable), min_size=1, max_size=8),
    st.lists(st.text(alphabet=NAME_ALPHABET, max_size=16), max_size=20),
)
def test_re2_syntax_classifies_as_re2_searches(expressions, names):
    patterns = ["regex:" + e for e in expressions]
    expected = [reference(patterns, name) for name in names]
    assert pure.Classifier(patterns).classify_many(names) == expected
    assert compiled.Classifier(patterns).classify_many(names) == expected
