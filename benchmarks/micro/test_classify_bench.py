"""Classify names over 1,000 limit patterns: compiled vs pure twin vs one `re` alternation.

Each round classifies a batch of names; names/s = batch / mean round time, kept in each
benchmark's extra_info (the hot_paths case gathers them).
"""

import os

import pytest

from cases.classify_workload import alternation, make_names, make_patterns
from tracker_core.compiled import _classify_py

try:
    from tracker_core.compiled import _classify_c
except ImportError:  # built with TRACKER_NO_EXTENSIONS=1
    _classify_c = None

BATCH = 20_000
ROUNDS = 1 if os.environ.get("BENCH_QUICK") else 10  # the hot_paths case's --quick
BASELINE_BATCH = 200  # the alternation manages a few thousand names/s; keep its rounds short
PATTERNS = make_patterns()
NAMES = make_names(BATCH)


def _record(benchmark, batch, matched):
    if benchmark.disabled or benchmark.stats is None:
        return  # --benchmark-disable: the call ran once, untimed
    benchmark.extra_info["batch"] = batch
    benchmark.extra_info["names_per_s"] = round(batch / benchmark.stats.stats.mean)
    benchmark.extra_info["matched_share"] = round(matched / batch, 4)


@pytest.mark.parametrize("label", ["compiled", "pure twin"])
def test_classifier(benchmark, label):
    module = _classify_c if label == "compiled" else _classify_py
    if module is None:
        pytest.skip("built without extensions")
    classifier = module.Classifier(PATTERNS)
    result = benchmark.pedantic(classifier.classify_many, args=(NAMES,), rounds=ROUNDS, warmup_rounds=1)
    _record(benchmark, BATCH, sum(1 for x in result if x >= 0))


@pytest.mark.parametrize("label", ["re alternation"])
def test_re_alternation_baseline(benchmark, label):
    regex = alternation(PATTERNS)
    names = NAMES[:BASELINE_BATCH]

    def classify_all():
        return [regex.search(name) for name in names]

    result = benchmark.pedantic(classify_all, rounds=min(3, ROUNDS), warmup_rounds=0)
    _record(benchmark, BASELINE_BATCH, sum(1 for x in result if x is not None))
