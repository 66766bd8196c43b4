"""Each compiled hot-path module and its pure-Python twin, for tests that compare them."""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys

import pytest

from tracker_core.compiled import twins

HOT_PATH_MODULES = ("classify", "protocol", "bloom")
# The module the tracker imports each through (it loads the compiled module or the twin).
FACADES = {
    "classify": "tracker_core.compiled.classify",
    "protocol": "tracker_core.compiled.protocol",
    "bloom": "tracker_core.items.bloom_plan",
}

# The twins run: `make test` runs these files a second time with TRACKER_PURE_PYTHON=1 (conftest
# marks their tests `twins`). For each hot-path module, the files whose tests are about it or the
# code that calls it: the twins' own agreement tests, then classification (limits, ReDoS, the
# maxima's reclassify), the Bloom filter (its kinds and salt, bloom_add, intake, backfeed) and the
# protocol's parsing (the warrior API in-process and through the hot path, the HQ, the done body
# limits). Tests elsewhere reach the twins too (creating a project builds a Classifier and sizes
# a filter), with inputs these files already cover; the main run covers them compiled.
# In the twins run each file must reach its modules' twins (conftest checks at the end), and
# test_twins_suite.py fails when a module with a twin has no tests here.
TWIN_TESTS = {
    "classify": (
        "core/compiled/test_classify.py",
        "core/project/test_limits.py",
        "core/project/test_redos.py",
        "core/test_maxima.py",
        "core/items/test_intake.py",
        "core/items/test_intake_utf8.py",
        "api/warrior_api/test_backfeed.py",
        "api/warrior_api/test_api.py",
        "api/warrior_api/test_hot_path.py",
    ),
    "bloom": (
        "core/items/test_bloom.py",
        "core/items/test_bloom_kinds.py",
        "core/items/test_bloom_salt.py",
        "core/items/test_bloom_admin.py",
        "core/items/test_intake.py",
        "core/items/test_intake_utf8.py",
        "core/items/test_backfeed_entries.py",
        "lua/test_bloom_add.py",
        "api/warrior_api/test_backfeed.py",
        "api/warrior_api/test_api.py",
        "api/warrior_api/test_hot_path.py",
    ),
    "protocol": (
        "core/compiled/test_protocol_twins.py",
        "api/warrior_api/test_api.py",
        "api/warrior_api/test_hot_path.py",
        "api/warrior_api/test_warrior_hq.py",
        "api/warrior_api/test_hq_bounds.py",
        "api/warrior_api/test_done_body_limit.py",
    ),
}


def twin_test_files() -> set[str]:
    """Every file of the twins run, relative to tests/."""
    return {path for paths in TWIN_TESTS.values() for path in paths}


def pair(name: str):
    """(compiled, pure) for hot-path module NAME. Built normally, the compiled module must import
    (a silent fallback would hide a broken build); built with TRACKER_NO_EXTENSIONS=1 the test is
    skipped."""
    pure = importlib.import_module(f"tracker_core.compiled._{name}_py")
    if os.environ.get("TRACKER_NO_EXTENSIONS") == "1":
        compiled = pytest.importorskip(f"tracker_core.compiled._{name}_c")
    else:
        compiled = importlib.import_module(f"tracker_core.compiled._{name}_c")
    return compiled, pure


def in_use_matches_environment(name: str) -> None:
    """The module the tracker picked is the compiled one, or the twin under TRACKER_PURE_PYTHON=1."""
    facade = importlib.import_module(FACADES[name])
    compiled, pure = pair(name)
    if twins.pure_requested():
        assert facade.COMPILED is False and facade._impl is pure
    else:
        assert facade.COMPILED is True and facade._impl is compiled
        assert compiled.__file__.endswith(".so")


def bound_names(name: str) -> dict[str, object]:
    """What facade NAME (FACADES) took from the twin it loaded: {attribute: object}."""
    facade = importlib.import_module(FACADES[name])
    return {
        attr: value
        for attr, value in vars(facade).items()
        if not attr.startswith("_")
        and getattr(facade._impl, attr, None) is value
        and getattr(value, "__module__", None) == facade._impl.__name__
    }


def swap_to(label: str, variants: dict[str, dict], monkeypatch) -> list[tuple[str, str]]:
    """Point every name the tracker bound from a hot-path module (the facades' functions and
    classes, and copies such as limits.Classifier) at variant LABEL ("compiled" or "pure") of
    VARIANTS ({module: twins.both(module)}), for the test's duration. Returns (module, where)
    for each name swapped."""
    originals = {}
    for name in variants:
        for attr, value in bound_names(name).items():
            if all(hasattr(variant, attr) for variant in variants[name].values()):
                originals[id(value)] = (name, attr, value)  # not the helpers only the pure one has
    swapped = []
    for module in _tracker_modules():
        for attr, value in list(vars(module).items()):
            found = originals.get(id(value))
            if found is not None and found[2] is value:
                name, twin_attr, _ = found
                monkeypatch.setattr(module, attr, getattr(variants[name][label], twin_attr))
                swapped.append((name, f"{module.__name__}.{attr}"))
    return swapped


def same_in_both_runs(item) -> bool:
    """Whether test ITEM runs the same code with or without TRACKER_PURE_PYTHON=1: it is the
    compiled variant of a test parametrized by variant (a twin module, or "compiled" for the
    implementation and hashing fixtures), or its function names both a compiled module and its
    twin (it compares them itself). The twins run leaves these out: the main run has run them."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(value == "compiled" or _variant(value) == "compiled" for value in params.values()):
        return True
    function = getattr(item, "obj", None)
    function = getattr(getattr(function, "hypothesis", None), "inner_test", function)
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    named = {_variant(function.__globals__.get(name)) for name in code.co_names}
    return {"compiled", "pure"} <= named


def _variant(value) -> str | None:
    """ "compiled" or "pure" when VALUE is a hot-path module's compiled module or its twin."""
    if not isinstance(value, type(sys)):
        return None
    for name in HOT_PATH_MODULES:
        if value.__name__ == f"tracker_core.compiled._{name}_c":
            return "compiled"
        if value.__name__ == f"tracker_core.compiled._{name}_py":
            return "pure"
    return None


def install_probe(record) -> None:
    """Call RECORD(module) whenever a pure twin's function or method runs: every name bound from a
    twin (in the twin module itself and wherever the tracker copied it) is wrapped; a class's
    methods are wrapped in place. For the twins run's check that each listed file reaches them."""

    def wrapped(function, name):
        @functools.wraps(function)
        def probe(*args, **kwargs):
            record(name)
            return function(*args, **kwargs)

        return probe

    for name in HOT_PATH_MODULES:
        pure = importlib.import_module(f"tracker_core.compiled._{name}_py")
        for value in list(vars(pure).values()):
            if getattr(value, "__module__", None) != pure.__name__:
                continue
            if inspect.isfunction(value):
                probe = wrapped(value, name)
                for module in [pure, *_tracker_modules()]:
                    for where, held in list(vars(module).items()):
                        if held is value:
                            setattr(module, where, probe)
            elif inspect.isclass(value) and not issubclass(value, BaseException):
                for method, function in list(vars(value).items()):
                    if inspect.isfunction(function):
                        setattr(value, method, wrapped(function, name))


def _tracker_modules():
    return [
        module
        for module_name, module in list(sys.modules.items())
        if module is not None
        and module_name.startswith(("tracker_core", "tracker_api"))
        and not module_name.endswith(("_c", "_py"))
    ]
