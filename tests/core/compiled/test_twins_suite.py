"""The twins run (`make test`'s second pytest: TRACKER_PURE_PYTHON=1, -m "twins and not slow") covers
every compiled hot-path module: each one has its pure twin and files in support.twins.TWIN_TESTS,
and those files give that run tests. (That each file reaches its twins is checked by the run
itself: conftest's TwinsProbe fails it otherwise.)"""

import os
import re
import subprocess
import sys

from support import twins
from support.paths import ROOT

SRC = ROOT / "src" / "tracker_core" / "compiled"
TWINS_RUN = "twins and not slow"


def test_every_compiled_module_has_a_twin_and_files_in_the_twins_run():
    compiled = {path.name.removeprefix("_").removesuffix("_c.pyx") for path in SRC.glob("_*_c.pyx")}
    assert {"classify", "protocol", "bloom"} <= compiled  # the glob finds the Cython sources
    assert set(twins.HOT_PATH_MODULES) == compiled == set(twins.TWIN_TESTS)
    for name in compiled:
        assert (SRC / f"_{name}_py.py").is_file(), name
        assert twins.TWIN_TESTS[name], f"no tests run {name}'s twin"
    missing = sorted(path for path in twins.twin_test_files() if not (ROOT / "tests" / path).is_file())
    assert missing == []


def test_make_test_runs_the_twins_on_the_pure_modules():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    pure_run = next(line for line in recipe.splitlines() if "TRACKER_PURE_PYTHON=1" in line)
    assert pure_run.strip().startswith("TRACKER_PURE_PYTHON=1 $(PY) -m pytest ")
    assert f'-m "{TWINS_RUN}"' in pure_run


def test_the_twins_run_has_tests_of_every_module_with_a_twin():
    listed = sorted(twins.twin_test_files())
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", TWINS_RUN]
        + [f"tests/{path}" for path in listed],
        cwd=ROOT,
        env=dict(os.environ, TRACKER_PURE_PYTHON="1"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    collected = {
        line.split("::")[0].removeprefix("tests/") for line in out.stdout.splitlines() if "::" in line
    }
    assert sorted(set(listed) - collected) == []  # every listed file gives the run tests
    for name, paths in twins.TWIN_TESTS.items():
        assert collected & set(paths), f"the twins run has no tests of {name}'s twin"
