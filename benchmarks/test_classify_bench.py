"""Classify names over 1,000 limit patterns: compiled vs pure twin vs one `re` alternation.

Each round classifies a batch of names; names/s = batch / mean round time. The figures also go
to results/classify.json (written when the module's benchmarks finish).
Run: .venv/bin/python -m pytest benchmarks/test_classify_bench.py
"""

import json
import platform
import sys
from pathlib import Path

import pytest

from classify_workload import PATTERN_MIX, alternation, make_names, make_patterns
from tracker_core import _classify_py

try:
    from tracker_core import _classify_c
except ImportError:  # built with TRACKER_NO_EXTENSIONS=1
    _classify_c = None

RESULTS = Path(__file__).with_name("results") / "classify.json"
BATCH = 20_000
BASELINE_BATCH = 200  # the alternation manages a few thousand names/s; keep its rounds short
PATTERNS = make_patterns()
NAMES = make_names(BATCH)
FIGURES = {}


@pytest.fixture(scope="module", autouse=True)
def write_figures():
    yield
    if not FIGURES:
        return
    RESULTS.parent.mkdir(exist_ok=True)
    names_per_s = {k: v["names_per_s"] for k, v in FIGURES.items()}
    RESULTS.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "python": platform.python_version(),
                "machine": platform.machine(),
                "patterns": len(PATTERNS),
                "pattern_mix": PATTERN_MIX,
                "results": FIGURES,
                "compiled_vs_twin": _ratio(names_per_s, "compiled", "pure twin"),
                "compiled_vs_re_alternation": _ratio(names_per_s, "compiled", "re alternation"),
            },
            indent=2,
        )
        + "\n"
    )


def _ratio(figures, a, b):
    return round(figures[a] / figures[b], 1) if a in figures and b in figures else None


def _record(benchmark, label, batch, matched):
    if benchmark.disabled or benchmark.stats is None:
        return  # --benchmark-disable: the call ran once, untimed; no figures to write
    mean_s = benchmark.stats.stats.mean
    FIGURES[label] = {
        "batch": batch,
        "mean_round_s": mean_s,
        "names_per_s": round(batch / mean_s),
        "matched_share": round(matched / batch, 4),
    }
    benchmark.extra_info["names_per_s"] = FIGURES[label]["names_per_s"]


@pytest.mark.parametrize("label", ["compiled", "pure twin"])
def test_classifier(benchmark, label):
    module = _classify_c if label == "compiled" else _classify_py
    if module is None:
        pytest.skip("built without extensions")
    classifier = module.Classifier(PATTERNS)
    result = benchmark.pedantic(classifier.classify_many, args=(NAMES,), rounds=10, warmup_rounds=1)
    _record(benchmark, label, BATCH, sum(1 for x in result if x >= 0))


@pytest.mark.parametrize("label", ["re alternation"])
def test_re_alternation_baseline(benchmark, label):
    regex = alternation(PATTERNS)
    names = NAMES[:BASELINE_BATCH]

    def classify_all():
        return [regex.search(name) for name in names]

    result = benchmark.pedantic(classify_all, rounds=3, warmup_rounds=0)
    _record(benchmark, label, BASELINE_BATCH, sum(1 for x in result if x is not None))
