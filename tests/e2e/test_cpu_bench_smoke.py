"""benchmarks/cpu_per_request.py --quick: every figure is a positive number, the report names each
one, and an earlier cpu.json's figures move into the history (the issue's baseline first).

A full run (`make bench`) is not a test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from cpu_bench.history import BASELINE, HEADLINES, SHOWN_LATEST, carried_history, shown_history
from support.paths import ROOT
from tracker_api.server import default_workers

EARLIER = {
    "date_utc": "2026-01-02T03:04:05Z",
    "command": "python benchmarks/cpu_per_request.py",
    "quick": False,
    "versions": {"git_commit": "0" * 40},
    "figures": {key: 1.5 for key, _, _ in HEADLINES},
    "history": [BASELINE],
}


def test_a_first_run_starts_its_history_with_the_issue_baseline():
    assert carried_history(None) == [BASELINE]
    assert BASELINE["label"] == "issue 16 baseline (as filed)"
    assert BASELINE["figures"]["request_worker_cpu_us"] == [50, 63]


def test_the_report_shows_the_baseline_the_first_run_and_the_latest_while_the_file_keeps_all():
    runs = [BASELINE] + [{"label": f"run {n}", "figures": {}} for n in range(10)]
    assert shown_history(runs[: SHOWN_LATEST + 2]) == runs[: SHOWN_LATEST + 2]
    shown = shown_history(runs)
    assert [h["label"] for h in shown] == [BASELINE["label"], "run 0", "run 7", "run 8", "run 9"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make deps)")
def test_a_quick_run_measures_every_case_and_keeps_the_history(tmp_path):
    (tmp_path / "cpu.json").write_text(json.dumps(EARLIER))
    done = subprocess.run(
        [sys.executable, "benchmarks/cpu_per_request.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "cpu.json").read_text())
    assert list(results["figures"]) == [key for key, _, _ in HEADLINES]
    for key, value in results["figures"].items():
        assert isinstance(value, (int, float)) and value > 0, key
    assert results["machine"]["cores"] and results["date_utc"] and "--quick" in results["command"]
    for case in ("request", "request_unix", "done", "request_busy", "request_unix_busy", "done_busy"):
        assert results["cases"][case]["non_2xx"] == 0  # every claim and done answered, none ran dry
    # the full-load rows: every worker of `tracker serve`'s default count, not their parent
    for case in ("hello_busy", "hello_ping_busy", "request_busy", "request_unix_busy", "done_busy"):
        assert results["cases"][case]["workers_measured"] == default_workers()
    # one PING a request: Redis ran about one command a request (wrk's last replies may be cut)
    assert 0.9 <= results["cases"]["hello_ping_busy"]["redis_commands_per_unit"] <= 1.1
    # the one bjoern worker, not its parent
    for case in ("hello", "request", "request_unix", "done", "backfeed", "backfeed_fingerprint"):
        assert results["cases"][case]["workers_measured"] == 1
    for case, kind in (("backfeed", "layered"), ("backfeed_fingerprint", "fingerprint")):
        assert results["cases"][case]["new_items"] >= results["cases"][case]["items_sent"] > 0
        assert results["cases"][case]["bloom"]["kind"] == kind
    # The earlier file's history is kept, its own figures appended after it.
    baseline, earlier = results["history"]
    assert baseline == BASELINE
    assert earlier["figures"] == EARLIER["figures"] and earlier["date_utc"] == EARLIER["date_utc"]
    report = (tmp_path / "cpu.md").read_text()
    for _, what, _ in HEADLINES:
        assert what in report
    assert "issue 16 baseline (as filed)" in report and EARLIER["date_utc"] in report
    assert "| ≤ 25 |" in report and "| ≤ 5 |" in report  # the aims stand beside the figures
