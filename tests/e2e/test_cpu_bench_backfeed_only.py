"""benchmarks/cpu_per_request.py --only: only the backfeed rows, in alternating rounds, printed as
one JSON line; cpu.json and cpu.md are left alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from support.paths import ROOT


def run(tmp_path, *args, timeout=120):
    return subprocess.run(
        [sys.executable, "benchmarks/cpu_per_request.py", "--out", str(tmp_path), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_rounds_need_only_and_are_one_or_more(tmp_path):
    assert "more than 1 only with --only" in run(tmp_path, "--rounds", "2").stderr
    assert run(tmp_path, "--only", "backfeed", "--rounds", "0").returncode != 0
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make deps)")
def test_only_the_fingerprint_row_in_two_rounds_each_into_an_empty_blocked_filter(tmp_path):
    done = run(tmp_path, "--quick", "--only", "backfeed_fingerprint", "--rounds", "2")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.splitlines()[-1])
    assert printed["only"] == "backfeed_fingerprint" and list(printed["cases"]) == ["backfeed_fingerprint"]
    case = printed["cases"]["backfeed_fingerprint"]
    assert len(case["rounds"]) == len(case["commands"]) == 2
    for figures in case["rounds"]:
        # each round its own project: every item new, the queue filled from empty
        assert figures["new_items"] > 0 and figures["queue_after"] == figures["new_items"]
        assert figures["bloom_block"] == 16  # as `tracker backfeed filter P --kind fingerprint` makes it
        assert figures["redis_cpu_us_per_new_item"] > 0 and figures["non_2xx"] == 0
    assert case["redis_cpu_us_per_new_item_median"] > 0
    assert not list(tmp_path.iterdir())  # no cpu.json, no cpu.md


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make deps)")
def test_a_whole_run_reports_the_fingerprint_filter_blocked_and_the_queue_it_filled(tmp_path):
    done = run(tmp_path, "--quick")
    assert done.returncode == 0, done.stderr
    case = json.loads((tmp_path / "cpu.json").read_text())["cases"]["backfeed_fingerprint"]
    assert case["bloom_block"] == 16 and case["queue_before"] == 0
    assert case["queue_after"] == case["new_items"] > 0
    report = (tmp_path / "cpu.md").read_text()
    assert "new, blocked: yes)" in report and "starts empty and ends holding every new item" in report
