"""The pattern classifier: compiled, or its pure-Python twin (see twins.py)."""

from tracker_core.compiled import twins
from tracker_core.compiled._classify_py import NO_MATCH, PatternError, parse_pattern  # noqa: F401

_impl, COMPILED = twins.load("classify")
Classifier = _impl.Classifier
