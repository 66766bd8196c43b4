"""Run tests/support/warrior_driver.py (the real seesaw-kit pipeline) in a subprocess and read its result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("warrior_driver.py")


def start_warrior(
    live_server,
    tmp_path,
    claims,
    *,
    project,
    multi=1,
    concurrent=1,
    upload=False,
    version="20240101.01",
    downloader="e2e-warrior",
    hold_s=0.0,
    log=None,
):
    """The driver started; its output piped (read by finish_warrior), or written to the file
    LOG for a warrior that runs long: a pipe nobody reads fills (64 KB of seesaw's item log) and
    blocks the warrior in its next write."""
    work_dir = tmp_path / f"warrior-{project}-{downloader}"
    work_dir.mkdir(exist_ok=True)
    command = [
        sys.executable,
        str(DRIVER),
        "--tracker",
        live_server.base,
        "--project",
        project,
        "--downloader",
        downloader,
        "--version",
        version,
        "--multi",
        str(multi),
        "--claims",
        str(claims),
        "--concurrent",
        str(concurrent),
        "--work-dir",
        str(work_dir),
    ]
    if upload:
        command.append("--upload")
    if hold_s:
        command += ["--hold-s", str(hold_s)]
    return subprocess.Popen(
        command,
        cwd=work_dir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if log is None else open(log, "w"),  # noqa: SIM115 - the child's
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_warrior(process, timeout_s=90) -> tuple[dict, str]:
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail("the warrior did not finish; its log:\n" + output[-4000:])
    assert process.returncode == 0, output[-4000:]
    result_lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert result_lines, output[-4000:]
    return json.loads(result_lines[-1][len("RESULT ") :]), output


def run_warrior(live_server, tmp_path, claims, **options) -> tuple[dict, str]:
    return finish_warrior(start_warrior(live_server, tmp_path, claims, **options))
