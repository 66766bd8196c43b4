"""The micro-benchmarks' fixture: a hot-path module, compiled and as its pure twin."""

from __future__ import annotations

import importlib

import pytest


@pytest.fixture(params=["compiled", "pure"])
def implementation(request):
    """The module the benchmark file's TWIN names ("bloom": _bloom_c, _bloom_py): the compiled one
    when it is built, else skip; or its pure twin."""
    name = request.module.TWIN
    if request.param == "pure":
        return importlib.import_module(f"tracker_core.compiled._{name}_py")
    try:
        return importlib.import_module(f"tracker_core.compiled._{name}_c")
    except ImportError:
        pytest.skip(f"_{name}_c is not built (make build)")
