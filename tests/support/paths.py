"""Where things are: the repository root and the installed `tracker` command."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKER_BIN = Path(sys.executable).with_name("tracker")
ARTIFACTS = ROOT / "tests" / "artifacts"
