"""The one frame every benchmark runs in.

A benchmark is a function registered with ``@case``: it is handed a ``Bench`` (its sizes, full or
``--quick``; a temporary directory the harness removes; the Redis it asks for, started and stopped
here) and returns its figures as a dict. The harness writes them to benchmarks/results/NAME.json
(and NAME.md from the case's report) with the run's provenance (command, commit, machine, load)
and the history of earlier runs, so no benchmark carries its own set-up or writer.

    PYTHONPATH=benchmarks python -m harness --list
    PYTHONPATH=benchmarks python -m harness --quick            # every case, small (CI)
    PYTHONPATH=benchmarks python -m harness --only cpu,bloom   # full size, results/ rewritten

Modules: ``registry`` (the cases and where they live), ``bench`` (what a case is handed),
``redis`` (the one place the benchmarks start Redis), ``results`` (the result files), ``cli``.
"""

import sys
from pathlib import Path

# The tests' support package: the Redis topologies and HTTP warriors the cluster cases drive.
_TESTS = str(Path(__file__).resolve().parents[2] / "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)

from harness.bench import Bench  # noqa: E402
from harness.registry import case  # noqa: E402

__all__ = ["Bench", "case"]
