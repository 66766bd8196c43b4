"""The CPU bench's worker account waits for a server's workers: a server answers on its port
before it has forked them (benchmarks/cpu_bench/meters.py)."""

import subprocess
import sys

import pytest

from cpu_bench.meters import WorkerCpu

# Forks one child 0.5 s after starting, as a server that listens first and forks later.
LATE_FORK = "import os, time; time.sleep(0.5); os.fork() or time.sleep(30); time.sleep(30)"


@pytest.fixture
def late_forker():
    process = subprocess.Popen([sys.executable, "-c", LATE_FORK])
    yield process
    subprocess.run(["pkill", "-KILL", "-P", str(process.pid)], check=False)
    process.kill()
    process.wait()


def test_workers_forked_after_the_port_answers_are_found(late_forker):
    meter = WorkerCpu(late_forker.pid, wait_s=10)
    assert len(meter.pids) == 1 and meter.pids[0] != late_forker.pid


def test_a_server_that_never_forks_is_refused_after_the_wait():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(RuntimeError, match="no worker children after 0.3 s"):
            WorkerCpu(process.pid, wait_s=0.3)
    finally:
        process.kill()
        process.wait()
