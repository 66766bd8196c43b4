"""The one selector between a compiled hot-path module and its pure-Python twin.

Each of ``classify``, ``protocol`` and ``bloom`` has a Cython module (``_NAME_c``) and a twin
(``_NAME_py``) with the same functions; tests compare them. ``TRACKER_PURE_PYTHON=1`` picks the
twins everywhere (the second run of ``make test``, the twins' tests, runs that way); otherwise
the compiled module is used when it was built, and the twin when it was not (an install without
a C compiler still works, only slower).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_ENV = "TRACKER_PURE_PYTHON"


def pure_requested() -> bool:
    return os.environ.get(PURE_ENV) == "1"


def load(name: str) -> tuple[ModuleType, bool]:
    """(module, compiled) for hot-path module NAME: ``tracker_core.compiled._NAME_c`` or ``_NAME_py``."""
    if not pure_requested():
        try:
            return importlib.import_module(f"tracker_core.compiled._{name}_c"), True
        except ImportError:
            pass
    return importlib.import_module(f"tracker_core.compiled._{name}_py"), False


def both(name: str) -> dict[str, ModuleType]:
    """Every variant of NAME that is importable here, by label ("compiled", "pure"): what the
    twin fixture runs a test against."""
    variants = {"pure": importlib.import_module(f"tracker_core.compiled._{name}_py")}
    try:
        variants["compiled"] = importlib.import_module(f"tracker_core.compiled._{name}_c")
    except ImportError:
        pass
    return variants
