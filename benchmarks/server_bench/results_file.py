"""A benchmark's two result files: NAME.json (figures plus the history of earlier runs) and
NAME.md (the report), as every whole-server benchmark writes them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def write_with_history(
    results: dict, out: Path, name: str, carried_history: Callable, report: Callable[[dict], str]
) -> tuple[Path, Path]:
    """Write OUT/NAME.json and OUT/NAME.md; the previous NAME.json's figures go into RESULTS'
    history by CARRIED_HISTORY(previous or None). Returns the two paths."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    previous = json.loads(path.read_text()) if path.exists() else None
    results["history"] = carried_history(previous)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    md = out / f"{name}.md"
    md.write_text(report(results))
    return path, md
