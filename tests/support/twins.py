"""Each compiled hot-path module and its pure-Python twin, for tests that compare them."""

from __future__ import annotations

import importlib
import os

import pytest

from tracker_core import twins

HOT_PATH_MODULES = ("classify", "protocol", "bloom")


def pair(name: str):
    """(compiled, pure) for hot-path module NAME. Built normally, the compiled module must import
    (a silent fallback would hide a broken build); built with TRACKER_NO_EXTENSIONS=1 the test is
    skipped."""
    pure = importlib.import_module(f"tracker_core._{name}_py")
    if os.environ.get("TRACKER_NO_EXTENSIONS") == "1":
        compiled = pytest.importorskip(f"tracker_core._{name}_c")
    else:
        compiled = importlib.import_module(f"tracker_core._{name}_c")
    return compiled, pure


def in_use_matches_environment(name: str) -> None:
    """The module the tracker picked is the compiled one, or the twin under TRACKER_PURE_PYTHON=1."""
    facade = importlib.import_module(f"tracker_core.{name}")
    compiled, pure = pair(name)
    if twins.pure_requested():
        assert facade.COMPILED is False and facade._impl is pure
    else:
        assert facade.COMPILED is True and facade._impl is compiled
        assert compiled.__file__.endswith(".so")
