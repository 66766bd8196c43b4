"""The README's tour, pasted into a shell beside `make run` (tracker run --demo): each step shows
what its comment says it shows."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from support.paths import ROOT
from support.processes import free_port, start_demo, stop, wait_for

pytestmark = pytest.mark.slow


def tour_script(readme: str, port: int) -> str:
    """The shell block of the README that starts with the claim, on PORT instead of 8080, without
    the line that opens a browser."""
    block = next(b for b in readme.split("```sh\n")[1:] if b.startswith("claim=$(curl"))
    script = block.split("```", 1)[0]
    script, n = re.subn(r"http://127\.0\.0\.1:8080/", f"http://127.0.0.1:{port}/", script)
    assert n == 3, f"the tour names http://127.0.0.1:8080/ {n} times, not 3"
    return "\n".join(line for line in script.splitlines() if not line.startswith("xdg-open"))


def test_the_tour_marks_done_the_item_its_claim_handed_out(tmp_path):
    readme = (ROOT / "README.md").read_text()
    promised = re.search(r"tracker status demo +# done (\d+), out (\d+), queues\.todo (\d+)", readme)
    assert promised, "the tour's status line no longer says what it shows"
    port = free_port()
    tracker, env = start_demo(tmp_path, port)
    try:
        started = wait_for(lambda: "leaderboards at" in (tmp_path / "run.log").read_text(), 60, step_s=0.3)
        assert started, (tmp_path / "run.log").read_text()[-2000:]
        shown = subprocess.run(
            ["bash", "-c", tour_script(readme, port)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stdout + shown.stderr
        claim, rest = shown.stdout.split("\n", 1)
        names = json.loads(claim)["item_name"].split("\0")
        assert len(names) == 3 and all(re.fullmatch(r"demo-item-\d{6}", n) for n in names), claim
        assert rest.startswith("OK"), rest
        status = dict(line.split(None, 1) for line in rest[2:].splitlines() if line.strip())
        done, out, todo = promised.groups()
        assert (status["done"], status["out"], status["queues.todo"]) == (done, out, todo), status
        assert status["counters.bytes_done"] == "1234"
    finally:
        stop(tracker, timeout_s=30, group=True)
