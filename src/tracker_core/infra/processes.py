"""Start, wait for, stop and supervise processes: the one copy of these for the whole project.

The server forks its workers and supervises them, `tracker run` starts Redis, the maintainer and
the live feed, the load-test runner starts Locust, the benchmarks start the server and their
references, the tests start all of these: each through the helpers here (and supervision.py,
which keeps forked or started children running).

Children started here die with their parent by default (PR_SET_PDEATHSIG): a `kill -9` of the
tracker gives it no chance to stop them, and a worker that outlives it keeps the port, so the
next start fails with "address already in use".
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Have the kernel send SIG to this process when its parent dies (Linux; a no-op elsewhere).

    Also safe as a Popen preexec_fn (it survives exec). The kernel watches the parent *thread*:
    a child forked from a thread that ends is signalled then, so start children from the main
    thread (``start`` does so only there).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def name_process(name: str) -> None:
    """Name this process in /proc/PID/comm (ps, top; at most 15 bytes), so a forked child that
    is not what its inherited command line says (the renderer beside `serve`'s workers) shows."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass


def process_name(pid: int) -> str:
    """PID's /proc/PID/comm ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _die_with(parent: int, sig: int) -> None:
    """In a fresh child: die with PARENT, also when it died before prctl took effect."""
    die_with_parent(sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Whether PID runs: any of its threads is neither a zombie nor dead.

    The leader of a killed multi-threaded process shows as a zombie while its other threads still
    exit, holding the descriptors (a listening socket, say): it is gone only when they all are.
    """
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_runs(_stat_fields(f"/proc/{pid}/task/{thread}/stat")) for thread in threads)


def _stat_fields(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name (state first), or [] once the
    process or thread is gone. The name is in parentheses and may hold spaces and ")"."""
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _runs(fields: list[str]) -> bool:
    """Whether stat FIELDS (_stat_fields) are of a task that runs: there, and neither a zombie nor dead."""
    return bool(fields) and fields[0] not in ("Z", "X")


def children_of(pid: int) -> list[int]:
    """PID's direct children (Linux /proc)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def wait_for(predicate: Callable[[], object], timeout_s: float, step_s: float = 0.05) -> bool:
    """Poll PREDICATE until it holds or TIMEOUT_S pass; whether it held (checked once more at the end)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())


class ProcessExited(RuntimeError):
    """The process being waited for exited first."""


def _check_running(process: subprocess.Popen | None, what: str) -> None:
    if process is not None and process.poll() is not None:
        raise ProcessExited(f"{_name(process)} exited with {process.returncode} before {what}")


def _name(process: subprocess.Popen) -> str:
    args = process.args
    first = args[0] if isinstance(args, (list, tuple)) and args else args
    return Path(str(first)).name


def wait_for_port(
    port: int,
    process: subprocess.Popen | None = None,
    timeout_s: float = 15.0,
    host: str = "127.0.0.1",
) -> None:
    """Return once HOST:PORT takes connections; raise if PROCESS exits first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _check_running(process, f"listening on port {port}")
        if port_open(port, host, timeout_s=0.5):
            return
        time.sleep(0.05)
    _check_running(process, f"listening on port {port}")
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout_s} s")


class Started(subprocess.Popen):
    """A child that start() started: wait_for_line reads its captured output into ``lines``."""

    lines: list[str]
    _line_queue: queue.SimpleQueue[str | None]
    _line_reader: threading.Thread


def wait_for_line(process: Started, pattern: str, timeout_s: float = 15.0) -> re.Match:
    """Read PROCESS's output (started with ``capture=True``) until a line matches PATTERN.

    A daemon thread reads every line into ``process.lines`` (a list, for failure messages) and
    keeps reading after the match, so a chatty child never blocks on a full pipe.
    """
    rx = re.compile(pattern)
    reader = process.__dict__.get("_line_reader")
    if reader is None:
        output = process.stdout
        if output is None:
            raise ValueError(f"{_name(process)} was started without capture=True")
        process.lines = []
        process._line_queue = queue.SimpleQueue()

        def read() -> None:
            for line in output:
                process.lines.append(line)
                process._line_queue.put(line)
            process._line_queue.put(None)

        reader = process._line_reader = threading.Thread(target=read, daemon=True)
        reader.start()
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line matching {pattern!r} from {_name(process)} in {timeout_s} s")
        try:
            line = process._line_queue.get(timeout=min(left, 0.2))
        except queue.Empty:
            continue
        if line is None:  # end of output: it exited or closed stdout
            process._line_queue.put(None)  # for the next caller
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            _check_running(process, f"printing {pattern!r}")
            raise ProcessExited(f"{_name(process)} closed its output before printing {pattern!r}")
        match = rx.search(line)
        if match:
            return match


def start(
    argv: Sequence[str | os.PathLike],
    *,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    output: str | os.PathLike | int | None = None,
    capture: bool = False,
    die_with_parent_sig: int | None = signal.SIGTERM,
    new_session: bool = False,
    preexec: Callable[[], None] | None = None,
) -> Started:
    """Start ARGV with stdin closed.

    OUTPUT: a path (stdout and stderr appended to it), a descriptor or subprocess.DEVNULL, or
    None (inherited). CAPTURE: stdout and stderr as one text pipe (see wait_for_line). The child
    gets DIE_WITH_PARENT_SIG when this process dies (None: it outlives it), set only when called
    from the main thread (the kernel watches the thread that forks). PREEXEC runs in the child
    too (a resource limit, say).
    """
    parent = os.getpid()
    on_main = threading.current_thread() is threading.main_thread()
    death = die_with_parent_sig if on_main else None

    def child_setup() -> None:
        if death is not None:
            _die_with(parent, death)
        if preexec is not None:
            preexec()

    needs_setup = death is not None or preexec is not None
    stdout: int | IO | None
    stderr: int | None
    with contextlib.ExitStack() as files:
        if capture:
            stdout, stderr = subprocess.PIPE, subprocess.STDOUT
        elif isinstance(output, (str, os.PathLike)):
            stdout = files.enter_context(open(output, "ab"))  # the child keeps its own copy
            stderr = subprocess.STDOUT
        else:
            stdout, stderr = output, (subprocess.STDOUT if output is not None else None)
        return Started(
            [str(a) for a in argv],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=True if capture else None,
            start_new_session=new_session,
            preexec_fn=child_setup if needs_setup else None,
        )


def stop(
    process: subprocess.Popen | None,
    timeout_s: float = 10.0,
    sig: int = signal.SIGTERM,
    group: bool = False,
) -> int | None:
    """Send SIG (to its process group with GROUP), wait TIMEOUT_S, then SIGKILL; reap; the exit code.

    A process that has exited already is only reaped; None is accepted (nothing started yet).
    With GROUP, returns once nothing in the group runs any more: a member killed in the middle of
    a disk write dies only when the write returns, and until then it still writes (a `dd` outliving
    its shell by seconds on a busy disk, say).
    """
    if process is None:
        return None
    if process.poll() is None:
        _signal(process.pid, sig, group)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _signal(process.pid, signal.SIGKILL, group)
            process.wait()
    if group:  # what the leader left behind in its group goes too
        _signal(process.pid, signal.SIGKILL, group)
        wait_for(lambda: not group_members(process.pid), timeout_s)
    return process.returncode


def group_members(pgid: int) -> list[int]:
    """The pids of process group PGID that still run (zombies excluded), from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(f"/proc/{entry}/stat")  # state, ppid, pgrp, ...
            if _runs(fields) and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def _signal(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def stop_pids(pids: Iterable[int], timeout_s: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Send SIG to every pid, wait up to TIMEOUT_S for all, SIGKILL the rest; reap our children.

    For pids without a Popen: forked workers, or processes found in /proc (a child's children).
    """
    pids = list(pids)
    for pid in pids:
        _signal(pid, sig, False)
    if not wait_for(lambda: not any(_running(p) for p in pids), timeout_s):
        for pid in pids:
            _signal(pid, signal.SIGKILL, False)
        wait_for(lambda: not any(_running(p) for p in pids), 5.0)


def _running(pid: int) -> bool:
    """Whether PID still runs; reaps it when it is our exited child."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    except ChildProcessError:
        pass  # not our child (or reaped already): ask /proc
    return alive(pid)


def fork(
    target: Callable[[], object], die_with_parent_sig: int = signal.SIGKILL, name: str | None = None
) -> int:
    """Run TARGET in a forked child that exits when TARGET returns or its parent dies; its pid.

    The child never returns into the caller's code (os._exit, no atexit or finally of the parent's).
    NAME (at most 15 bytes) is the child's /proc/PID/comm from its first instant: the parent takes
    it for the fork and takes its own back, so nobody listing the children sees the child unnamed
    (a child not yet scheduled runs nothing of its own for milliseconds on a busy machine).
    """
    parent = os.getpid()
    own_name = process_name(parent) if name else ""
    if name:
        name_process(name)
    try:
        pid = os.fork()
    finally:
        if name and os.getpid() == parent:
            name_process(own_name)
    if pid:
        return pid
    code = 0
    try:
        _die_with(parent, die_with_parent_sig)
        target()
    except BaseException:  # noqa: BLE001 - a child must never unwind into the parent's code
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)
