"""Keep children running: restart each one that dies, after a backoff; stop them all at the end.

Owns Supervisor (the server's workers and renderer, `tracker run`'s processes) and Backoff; the
children are started and stopped with processes.py.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker_core.infra.processes import stop_pids


@dataclass
class Backoff:
    """How long to wait before restarting a child: nothing after a healthy run, then doubling.

    A child that ran at least HEALTHY_AFTER_S is restarted after FIRST_S; one that died sooner
    waits twice as long as last time, up to MAX_S, so a crash loop cannot spin.
    """

    first_s: float = 0.0
    min_s: float = 0.1
    max_s: float = 60.0
    healthy_after_s: float = 60.0
    _last_s: float = 0.0

    def next_delay_s(self, ran_s: float) -> float:
        if ran_s >= self.healthy_after_s:
            self._last_s = self.first_s
        else:
            self._last_s = min(max(self._last_s * 2, self.min_s), self.max_s)
        return self._last_s


@dataclass
class _Child:
    name: str
    spawn: Callable[[], int]
    backoff: Backoff
    pid: int | None = None
    started: float = 0.0
    restart_at: float | None = None


class Supervisor:
    """Keep children running: restart each one that dies (after its backoff), stop all at the end.

    Children are given as SPAWN callables that start one and return its pid (``fork(...)`` or
    ``start(...).pid``). Each child is reaped by its own pid, never by ``waitpid(-1)``, so other
    children of the same process (started outside the supervisor) are left alone.

    ``request_stop`` may be installed as a signal handler; ``run`` then stops every child and
    returns.
    """

    def __init__(self, log: Callable[[str], None] | None = None, poll_s: float = 0.2):
        self._children: list[_Child] = []
        self._log = log or logging.getLogger("tracker.processes").warning
        self.poll_s = poll_s
        self.stopping = False
        self.restarts = 0

    def add(self, name: str, spawn: Callable[[], int], backoff: Backoff | None = None) -> int:
        """Start a child now and keep it running; its pid."""
        child = _Child(name, spawn, backoff or Backoff())
        self._children.append(child)
        return self._start(child)

    @property
    def pids(self) -> list[int]:
        return [c.pid for c in self._children if c.pid is not None]

    def request_stop(self, *_signal_args) -> None:
        self.stopping = True

    def stop_on_signals(self, *signals: int) -> None:
        """Install request_stop for SIGNALS (default SIGTERM and SIGINT)."""
        for sig in signals or (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.request_stop)

    def _start(self, child: _Child) -> int:
        child.pid = child.spawn()
        child.started = time.monotonic()
        child.restart_at = None
        return child.pid

    def check(self) -> None:
        """Reap children that died and restart those whose backoff has passed (one round)."""
        now = time.monotonic()
        for child in self._children:
            if child.pid is not None:
                try:
                    pid, status = os.waitpid(child.pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere: take it as dead
                    pid, status = child.pid, -1
                if pid:
                    delay = child.backoff.next_delay_s(now - child.started)
                    how = _describe(status)
                    self._log(
                        f"{child.name} {child.pid} {how}; restarting"
                        + (f" in {delay:.1f}s" if delay >= 0.1 else "")
                    )
                    child.pid, child.restart_at = None, now + delay
            if (
                child.pid is None
                and child.restart_at is not None
                and now >= child.restart_at
                and not self.stopping
            ):
                self._start(child)
                self.restarts += 1

    def run(self) -> None:
        """Supervise until request_stop; then stop every child."""
        try:
            while not self.stopping:
                self.check()
                time.sleep(self.poll_s)
        finally:
            self.stop_all()

    def stop_all(self, timeout_s: float = 10.0) -> None:
        self.stopping = True
        pids = self.pids
        for child in self._children:
            child.pid, child.restart_at = None, None
        stop_pids(pids, timeout_s)


def _describe(status: int) -> str:
    if status < 0:
        return "is gone"
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited ({os.WEXITSTATUS(status)})"
