"""The Makefile names only files that exist: `make fuzz` (part of `make chaos`) ran
tests/test_fuzz.py after the tests moved to tests/e2e/, and failed with "file not found"."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_path_the_makefile_names_exists():
    text = (REPO / "Makefile").read_text()
    named = set(
        re.findall(r"(?<![\w/.$(])((?:tests|benchmarks|src|loadtest|packaging|ansible)/[\w./-]*\w)", text)
    )
    assert "tests/e2e/test_fuzz.py" in named  # the pattern finds what the targets run
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert missing == []
