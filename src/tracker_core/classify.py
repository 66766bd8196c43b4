"""Pick the compiled pattern classifier, or its pure-Python twin when TRACKER_PURE_PYTHON=1."""

import os

from tracker_core._classify_py import NO_MATCH, PatternError, parse_pattern  # noqa: F401

if os.environ.get("TRACKER_PURE_PYTHON") == "1":
    from tracker_core._classify_py import Classifier

    COMPILED = False
else:
    try:
        from tracker_core._classify_c import Classifier

        COMPILED = True
    except ImportError:
        from tracker_core._classify_py import Classifier  # noqa: F401

        COMPILED = False
