"""Hot-path protocol helpers: the compiled module against its pure-Python twin, same inputs.

Run through the harness (the hot_paths case); figures in benchmarks/results/hot_paths.json and .md.
"""

from __future__ import annotations

import pytest

TWIN = "protocol"  # conftest.py's implementation fixture: _protocol_c and _protocol_py

# One thousand names as a multi-item done body carries them: NUL-joined, trailing NUL.
THOUSAND_NAMES = "".join(f"user-{n:07d}\0" for n in range(1000))
TEN_NAMES = "".join(f"user-{n:07d}\0" for n in range(10))
BYTES_ONE_DOMAIN = {"data": 123_456_789}
BYTES_FOUR_DOMAINS = {"data": 123_456_789, "warc": 987_654, "logs": 4_321, "meta": 12}


@pytest.mark.parametrize(
    "text,count", [(THOUSAND_NAMES, 1000), (TEN_NAMES, 10)], ids=["1000 names", "10 names"]
)
def test_split_items(benchmark, implementation, text, count):
    names = benchmark(implementation.split_items, text, 1000, 1024)
    assert len(names) == count and names[0] == "user-0000000"


@pytest.mark.parametrize(
    "name,valid", [("warrior-Name_0123456789", True), ("bad name!", False)], ids=["valid", "invalid"]
)
def test_valid_downloader(benchmark, implementation, name, valid):
    assert benchmark(implementation.valid_downloader, name) is valid


def test_version_older(benchmark, implementation):
    # The check every request makes when a project sets min_version.
    assert benchmark(implementation.version_older, "20240101.01", "20240102.01") is True


def test_version_key(benchmark, implementation):
    assert benchmark(implementation.version_key, "20240101.01") == (20240101, 1)


@pytest.mark.parametrize("value", [BYTES_ONE_DOMAIN, BYTES_FOUR_DOMAINS], ids=["1 domain", "4 domains"])
def test_flatten_bytes(benchmark, implementation, value):
    flat = benchmark(implementation.flatten_bytes, value)
    assert flat[:2] == ["data", 123_456_789] and len(flat) == 2 * len(value)
