"""The compiled protocol helpers and their pure twin agree, and the compiled one really loads."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import twins

compiled, pure = twins.pair("protocol")

DOWNLOADER_RE = re.compile(r"[-_a-zA-Z0-9]{3,30}\Z")


def test_compiled_module_is_the_one_in_use():
    twins.in_use_matches_environment("protocol")


@pytest.mark.parametrize("impl", [pure, compiled], ids=["pure", "compiled"])
@pytest.mark.parametrize(
    "name,ok",
    [
        ("abc", True),
        ("a-b_C9", True),
        ("x" * 30, True),
        ("ab", False),
        ("x" * 31, False),
        ("abc\n", False),
        ("abc\ndef", False),
        ("ab c", False),
        ("äbc", False),
        ("", False),
        (None, False),
        (123, False),
        (["abc"], False),
    ],
)
def test_downloader_names_are_anchored(impl, name, ok):
    assert impl.valid_downloader(name) is ok


@pytest.mark.parametrize("impl", [pure, compiled], ids=["pure", "compiled"])
def test_versions_compare_as_numbers(impl):
    assert impl.version_older("9", "20240101.02")
    assert not impl.version_older("20240101.02", "9")
    assert impl.version_older("20240101.01", "20240101.02")
    assert impl.version_older("20240101.2", "20240101.10")
    assert not impl.version_older("20240101.02", "20240101.02")
    assert impl.version_older("", "1")
    assert impl.version_key("v1.2-rc3") == (1, 2, 3)


@pytest.mark.parametrize("impl", [pure, compiled], ids=["pure", "compiled"])
def test_split_items(impl):
    assert impl.split_items("a\0b\0", 10, 5) == ["a", "b"]
    assert impl.split_items("a\x1fb", 10, 5) == ["a\x1fb"]
    assert impl.split_items("a\0\0b", 10, 5) is None
    assert impl.split_items("", 10, 5) is None
    assert impl.split_items("abcdef", 10, 5) is None
    assert impl.split_items("a\0b\0c", 2, 5) is None


@pytest.mark.parametrize("impl", [pure, compiled], ids=["pure", "compiled"])
def test_flatten_bytes(impl):
    assert impl.flatten_bytes({"data": 5, "warc": 0}) == ["data", 5, "warc", 0]
    assert impl.flatten_bytes({}) == []
    for bad in (
        {"data": -1},
        {"data": 1.5},
        {"data": "5"},
        {"data": True},
        {"": 1},
        {"data": 2**53},
        {"data": 10**13},
        {"a": 6 * 10**12, "b": 4 * 10**12},
        {f"d{n}": 1 for n in range(33)},
        {"data": 2**70},
        [1],
        None,
        "x",
    ):
        assert impl.flatten_bytes(bad) is None
    assert len(impl.flatten_bytes({f"d{n}": 1 for n in range(32)})) == 64
    assert impl.flatten_bytes({"a": 10**13 - 2, "b": 1}) == ["a", 10**13 - 2, "b", 1]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_twins_agree_on_names_and_versions(text):
    assert compiled.valid_downloader(text) == pure.valid_downloader(text) == bool(DOWNLOADER_RE.match(text))
    assert compiled.version_key(text) == pure.version_key(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=8), max_size=6),
    st.integers(0, 8),
    st.integers(0, 8),
)
def test_twins_agree_on_item_lists(names, max_items, max_length):
    text = "\0".join(names)
    assert compiled.split_items(text, max_items, max_length) == pure.split_items(text, max_items, max_length)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789.-", max_size=60), st.text(alphabet="0123456789.", max_size=60))
def test_twins_agree_on_long_versions(a, b):
    assert compiled.version_key(a) == pure.version_key(a)
    assert compiled.version_older(a, b) == pure.version_older(a, b)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(
            st.integers(-5, 2**54), st.floats(), st.integers(10**13 // 4, 10**13), st.booleans(), st.text()
        ),
        max_size=40,
    )
)
def test_twins_agree_on_bytes(value):
    assert compiled.flatten_bytes(value) == pure.flatten_bytes(value)
