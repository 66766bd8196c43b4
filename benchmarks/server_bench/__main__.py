"""`python benchmarks/server_bench [--quick] [--out DIR]`, or `python -m server_bench` with benchmarks/
on the path."""

import sys
from pathlib import Path

if not __package__:
    # Run as a directory, Python put the package's own directory first on the path, where its
    # modules would shadow others of the same name; import it as a package from benchmarks/.
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from server_bench.cli import main  # noqa: E402

main()
