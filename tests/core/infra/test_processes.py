"""processes.py on real processes: start, wait for a port or a line, stop, die with the parent,
supervise with backoff."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from tracker_core.infra import processes
from tracker_core.infra.supervision import Backoff, Supervisor

PY = sys.executable


def python(code: str, **kwargs) -> subprocess.Popen:
    return processes.start([PY, "-c", textwrap.dedent(code)], **kwargs)


def test_free_port_can_be_bound():
    port = processes.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # raises if the port is taken: the test's one check


def test_wait_for_port_returns_once_the_child_listens_and_stop_reaps_it():
    port = processes.free_port()
    server = processes.start(
        [PY, "-m", "http.server", "--bind", "127.0.0.1", str(port)], output=subprocess.DEVNULL
    )
    try:
        processes.wait_for_port(port, server, timeout_s=15)
        assert processes.port_open(port)
    finally:
        code = processes.stop(server)
    assert code == -signal.SIGTERM
    assert not processes.alive(server.pid)
    assert not processes.port_open(port)


def test_wait_for_port_fails_fast_when_the_child_exits():
    child = python("import sys; sys.exit(3)")
    started = time.monotonic()
    with pytest.raises(processes.ProcessExited, match="exited with 3"):
        processes.wait_for_port(processes.free_port(), child, timeout_s=30)
    assert time.monotonic() - started < 10


def test_wait_for_port_times_out_on_a_silent_child():
    child = python("import time; time.sleep(60)")
    try:
        with pytest.raises(TimeoutError):
            processes.wait_for_port(processes.free_port(), child, timeout_s=0.5)
    finally:
        processes.stop(child)


def test_stop_kills_a_child_that_ignores_sigterm():
    child = python(
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
        """,
        capture=True,
    )
    processes.wait_for_line(child, "^ready")
    started = time.monotonic()
    assert processes.stop(child, timeout_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_stop_of_an_exited_or_missing_process_only_reaps():
    assert processes.stop(None) is None
    child = python("import sys; sys.exit(5)")
    processes.wait_for(lambda: child.poll() is not None, 10)
    assert processes.stop(child) == 5


def test_stop_with_group_takes_the_grandchildren_along():
    leader = python(
        """
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("grandchild", grandchild.pid, flush=True)
        time.sleep(60)
        """,
        capture=True,
        new_session=True,
    )
    grandchild = int(processes.wait_for_line(leader, r"grandchild (\d+)").group(1))
    assert processes.alive(grandchild)
    assert sorted(processes.group_members(leader.pid)) == sorted([leader.pid, grandchild])
    processes.stop(leader, group=True)
    # gone when stop returns, not some time later: the orphan is not ours to wait for
    assert not processes.alive(grandchild)
    assert processes.group_members(leader.pid) == []


def test_wait_for_line_keeps_draining_a_chatty_child():
    """After the ready line the child writes far more than a pipe holds: it must not block."""
    child = python(
        """
        import sys
        print("serving on port 1234", flush=True)
        for _ in range(20000):
            print("x" * 100)
        """,
        capture=True,
    )
    match = processes.wait_for_line(child, r"serving on port (\d+)")
    assert match.group(1) == "1234"
    assert child.wait(timeout=20) == 0


def test_wait_for_line_reports_a_child_that_exits_without_it():
    child = python("print('something else'); raise SystemExit(4)", capture=True)
    with pytest.raises(processes.ProcessExited, match="4"):
        processes.wait_for_line(child, "^ready", timeout_s=20)
    assert child.lines == ["something else\n"]


def test_output_to_a_path_appends_stdout_and_stderr(tmp_path):
    log = tmp_path / "child.log"
    log.write_text("before\n")
    child = python("import sys; print('out'); print('err', file=sys.stderr)", output=log)
    assert child.wait(timeout=20) == 0
    assert log.read_text().splitlines() == ["before", "out", "err"]


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_process_whose_leader_exited_is_alive_while_a_thread_runs():
    """A killed multi-threaded worker shows its leader as a zombie while its other threads still
    exit, holding the listening socket: that is not gone yet."""
    child = python(
        """
        import ctypes, threading, time
        threading.Thread(target=time.sleep, args=(60,)).start()
        print("ready", flush=True)
        ctypes.CDLL(None).pthread_exit(None)  # the leader ends, the other thread runs on
        """,
        capture=True,
    )
    try:
        processes.wait_for_line(child, "^ready")
        assert processes.wait_for(lambda: _state(child.pid) == "Z", 5), _state(child.pid)
        assert processes.alive(child.pid)
    finally:
        processes.stop(child)
    assert not processes.alive(child.pid)


# -- dying with the parent -----------------------------------------------------------------

PARENT = """
import os, signal, sys, time
from tracker_core.infra import processes
{start}
print("child", pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    "start",
    [
        "pid = processes.start([sys.executable, '-c', 'import time; time.sleep(60)']).pid",
        "pid = processes.fork(lambda: time.sleep(60))",
    ],
    ids=["start", "fork"],
)
def test_a_child_dies_when_its_parent_is_killed(start):
    parent = python(PARENT.format(start=start), capture=True)
    child = int(processes.wait_for_line(parent, r"child (\d+)", timeout_s=20).group(1))
    try:
        assert processes.alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert processes.wait_for(lambda: not processes.alive(child), 5), "the child outlived its parent"
    finally:
        processes.stop_pids([child], timeout_s=1)


def test_a_child_may_outlive_its_parent_when_asked():
    parent = python(
        PARENT.format(
            start="pid = processes.start([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "die_with_parent_sig=None).pid"
        ),
        capture=True,
    )
    child = int(processes.wait_for_line(parent, r"child (\d+)", timeout_s=20).group(1))
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        time.sleep(0.5)
        assert processes.alive(child)
    finally:
        processes.stop_pids([child], timeout_s=1)


# -- supervision ------------------------------------------------------------------------------


def test_backoff_doubles_while_a_child_dies_fast_and_resets_after_a_healthy_run():
    backoff = Backoff(first_s=0.0, min_s=0.5, max_s=3.0, healthy_after_s=10.0)
    assert [backoff.next_delay_s(1.0) for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.next_delay_s(11.0) == 0.0
    assert backoff.next_delay_s(0.1) == 0.5


def test_supervisor_restarts_a_killed_child_and_stops_all():
    lines: list[str] = []
    supervisor = Supervisor(log=lines.append, poll_s=0.02)
    sleeper = [PY, "-c", "import time; time.sleep(60)"]
    at_once = Backoff(first_s=0.0, healthy_after_s=0.0)
    first = supervisor.add("sleeper", lambda: processes.start(sleeper).pid, at_once)
    other = supervisor.add("other", lambda: processes.fork(lambda: time.sleep(60)))
    os.kill(first, signal.SIGKILL)
    assert processes.wait_for(lambda: (supervisor.check(), supervisor.restarts)[1] == 1, 10)
    replaced = [p for p in supervisor.pids if p != other]
    assert len(replaced) == 1 and replaced[0] != first
    assert processes.alive(replaced[0]) and processes.alive(other)
    assert lines == [f"sleeper {first} was killed by SIGKILL; restarting"]
    supervisor.stop_all(timeout_s=5)
    assert supervisor.pids == []
    assert not processes.alive(replaced[0]) and not processes.alive(other)


def test_supervisor_backs_off_a_crash_loop():
    supervisor = Supervisor(log=lambda line: None, poll_s=0.02)
    backoff = Backoff(min_s=0.2, max_s=0.4, healthy_after_s=60)
    supervisor.add("crasher", lambda: processes.fork(lambda: os._exit(1)), backoff)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        supervisor.check()
        time.sleep(0.02)
    supervisor.stop_all()
    # 0.2 + 0.4 + 0.4 + 0.4 ... in two seconds: a handful of restarts, not hundreds.
    assert 2 <= supervisor.restarts <= 6, supervisor.restarts


def test_supervisor_leaves_other_children_to_their_owner():
    """It reaps its children by pid, so a Popen started beside it still gets its exit code."""
    supervisor = Supervisor(log=lambda line: None, poll_s=0.02)
    supervisor.add("sleeper", lambda: processes.fork(lambda: time.sleep(60)))
    bystander = python("raise SystemExit(7)")
    processes.wait_for(lambda: not processes.alive(bystander.pid), 10)
    for _ in range(5):
        supervisor.check()
    supervisor.stop_all()
    assert bystander.wait(timeout=5) == 7


def test_supervisor_run_stops_on_request_from_a_signal_handler():
    supervisor = Supervisor(log=lambda line: None, poll_s=0.02)
    child = supervisor.add("sleeper", lambda: processes.fork(lambda: time.sleep(60)))
    previous = signal.signal(signal.SIGALRM, supervisor.request_stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        started = time.monotonic()
        supervisor.run()
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 5
    assert not processes.alive(child)


def test_a_named_fork_is_named_from_its_first_instant_and_the_parent_keeps_its_name():
    own = processes.process_name(os.getpid())
    pid = processes.fork(lambda: time.sleep(5), name="tracker-test")
    try:
        # Read at once: the child may not have run a single instruction of its own yet.
        assert processes.process_name(pid) == "tracker-test"
        assert processes.process_name(os.getpid()) == own
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
