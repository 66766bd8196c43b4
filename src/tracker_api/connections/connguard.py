"""A guard thread in each bjoern worker: timeouts, body cap and file-descriptor pressure.

bjoern (libev, C) has no timeouts, reads a whole body before the app sees it and, once the
worker runs out of file descriptors, spins on `accept()` = EMFILE at full CPU (the listening
socket stays readable). It gives the application no hook, but it releases the GIL while its
loop waits, so a Python thread beside it can watch the worker's accepted sockets from the
kernel's side: `/proc/self/fd` lists them and `TCP_INFO` tells, per socket, how long it has been
silent and how many bytes went each way. The guard resets a socket it gives up on (after writing
a one-line answer when one fits); bjoern's next read fails and it frees it.

Never tell a client 408/503 for a request that may still run:
- a close RESETS the connection (connect AF_UNSPEC): the kernel drops what is queued unread and
  refuses what comes later, so bjoern can never read, and run, a request the client was told
  failed. (`shutdown()` leaves queued bytes readable: a whole /request that waited behind a
  stalled worker would be claimed after its client got a 408, with no one to receive the item.)
- bytes queued unread at the close (FIONREAD): no answer at all, just the reset; they may be a
  whole request, which is not the client's fault;
- while the worker is in a call, and at the scan after one, nothing is closed for `idle` or
  `slow`: bjoern reads no socket while the app runs, so the wait is the worker's, not the
  client's, and the request bjoern reads next must reach the app.
- every act goes through a duplicate of the descriptor whose inode is checked (fstat): bjoern,
  running without the GIL, may close the number and accept a new client on it (or the worker's
  Redis client reconnect on it) between the listing and the act.

Per connection, once per scan (every `scan_interval_s`, and out of turn at the fd limit):
- silent both ways for `idle_timeout_s`: closed (408 first if a request was under way);
- a request received in part, unanswered for `request_timeout_s` (a drip-fed slowloris, a
  Content-Length larger than the body, an upgrade bjoern never answers): 408 and closed;
- more unanswered bytes than `max_request_bytes`: 413 and closed (bodies are also capped in
  memory as they arrive, see bodycap.py, so this only stops the transfer early);
- when the process nears its descriptor limit: the longest-silent connections are shed so that
  bjoern's `accept()` finds a descriptor and never spins.

Near the limit the guard waits in `poll()` on the listening socket between its scans and wakes
only for connections that arrive: it scans out of turn to shed before bjoern runs out of
descriptors. At the limit, with nothing it may shed (every connection busy, or too fresh), it
pauses bjoern's accepting (see accept_pause.py) until a descriptor frees: the waiting connections
stay queued in the kernel instead of bjoern spinning on them.

The connection whose request the app is running right now is never touched: the app wrapper
marks when a call started, and that connection has been silent for as long as the call.

This module owns the policy (when to close, answer, shed or pause); reading and acting on one
socket from the kernel's side is worker_sockets.py.
"""

from __future__ import annotations

import math
import os
import resource
import select
import socket
import threading
import time

from tracker_api.connections.accept_pause import AcceptPause
from tracker_api.connections.worker_sockets import (
    TCP_ESTABLISHED,
    act_on_socket,
    answer_and_reset,
    http_answer,
    listed_fds,
    open_reserve,
    reset_connection,
    socket_inode,
    tcp_info,
)

REQUEST_HEAD_SLACK_BYTES = 128 * 1024  # request line and headers on top of the body cap
SHED_MIN_IDLE_S = 0.05

# Near the limit the guard used to scan on the clock every 20 ms, each scan a readlink and a
# TCP_INFO per descriptor: a worker whose clients held it there burnt 0.05 CPU-s/s at a limit of
# 96 descriptors, 0.37 at 1,024 and 0.92 at 4,096 (the guard thread alone; bjoern idled). Now
# it scans out of turn only when connections arrive (see _shed_out_of_turn).
SHED_GAP_S = 0.02
ARRIVALS_SCAN_RATIO = 10
# How long the guard lets bjoern take a waiting connection it has a descriptor for (bjoern may be
# running the app): the socket stays readable meanwhile, and poll() would answer at once.
ACCEPT_PAUSE_S = 0.002
ACCEPT_PAUSE_MAX_S = 0.064
PAUSED_CHECK_S = 0.05  # while bjoern's accepting is paused: how often to look for a free descriptor


TIMEOUT_408 = http_answer("408 Request Timeout")
TOO_LARGE_413 = http_answer("413 Content Too Large")
BUSY_503 = http_answer("503 Service Unavailable", "Retry-After: 5\r\n")


class _Conn:
    __slots__ = ("fd", "rx_base", "tx", "pending_since")

    def __init__(self, fd: int, tx: int):
        self.fd = fd
        self.rx_base = 0
        self.tx = tx
        self.pending_since: float | None = None


class ConnectionGuard:
    """Watch the sockets this worker accepted on LISTEN_SOCK; see the module docstring."""

    def __init__(
        self,
        listen_sock: socket.socket,
        idle_timeout_s: float,
        request_timeout_s: float,
        max_body_bytes: int,
        scan_interval_s: float = 1.0,
    ):
        self.listen_fd = listen_sock.fileno()
        self.local_port = listen_sock.getsockname()[1]
        self.idle_timeout_s = idle_timeout_s
        self.request_timeout_s = request_timeout_s
        self.max_request_bytes = max_body_bytes + REQUEST_HEAD_SLACK_BYTES
        self.scan_interval_s = min(scan_interval_s, idle_timeout_s / 4, request_timeout_s / 4)
        self.busy_since: float | None = None  # set by the app wrapper around each call
        self.conns: dict[int, _Conn] = {}  # socket inode -> state
        self.foreign: set[int] = set()  # inodes of sockets that are not ours (Redis...)
        self.closing: dict[int, float] = {}  # inode -> when the guard shut it down
        self.closed_total = {"idle": 0, "slow": 0, "too_large": 0, "shed": 0}
        self.reset_unread = 0  # closes with bytes queued unread: no answer
        self._busy_last_scan = False
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        margin = max(4, min(1024, nofile // 8))
        self.high_water = nofile - margin
        self.low_water = nofile - 2 * margin
        self.nofile = nofile
        self._reserve: int | None = None  # for listing /proc/self/fd at the limit; see start()
        self._shed_gap = SHED_GAP_S
        self._shed_at = 0.0  # when a scan out of turn may run next
        self._shed_freed = False  # the last one shed connections that bjoern has yet to close
        self._arrivals_scan_at = 0.0  # when connections arriving near the limit may start one
        self.accepting = AcceptPause(self.listen_fd)
        self._lookups_left = 10  # for the loop's epoll set (none: libev chose another backend)

    def start(self) -> ConnectionGuard:
        self._reserve = open_reserve()
        threading.Thread(target=self._run, name="connguard", daemon=True).start()
        return self

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        # bjoern's loop registers the listening socket as it starts, just after this thread.
        for _ in range(100):
            if self._find_registration():
                break
            time.sleep(0.01)
        poller = select.poll()
        poller.register(self.listen_fd, select.POLLIN)
        next_scan = 0.0
        near = False
        while True:
            try:
                now = time.monotonic()
                if now >= next_scan:
                    near = self.scan(now) >= self.low_water
                    next_scan = now + self.scan_interval_s
                    if not near:  # the pressure is over: the next one starts afresh
                        self._shed_gap, self._shed_at = SHED_GAP_S, 0.0
                        self.accepting.resume()
                    if self.accepting.registration is None and self._lookups_left > 0:
                        if not self._find_registration():
                            self._lookups_left -= 1
                if near:
                    self._wait_near_limit(poller, next_scan)
                else:
                    time.sleep(max(0.0, next_scan - time.monotonic()))
            except Exception:  # the guard must never die and leave the worker unguarded
                time.sleep(self.scan_interval_s)

    def _find_registration(self) -> bool:
        try:
            return self.accepting.find()
        except OSError:  # at the limit: no descriptor to list or read with
            return False

    def _wait_near_limit(self, poller, until: float) -> None:
        """Until UNTIL (the next scan), sleep in poll() on the listening socket and wake only
        for connections that arrive: scan out of turn to shed before bjoern runs out of
        descriptors; at the limit shed at once or, with nothing to shed, pause bjoern's
        accepting until a descriptor frees."""
        pause = ACCEPT_PAUSE_S
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            if self.accepting.paused:  # the socket stays readable: watch the clock instead
                time.sleep(min(PAUSED_CHECK_S, left))
                if not self._at_limit():
                    self.accepting.resume()
                elif time.monotonic() >= self._shed_at:
                    self._shed_out_of_turn(at_limit=True)
                continue
            if not poller.poll(math.ceil(left * 1000)):
                return
            at_limit = self._at_limit()
            if time.monotonic() >= (self._shed_at if at_limit else self._arrivals_scan_at):
                self._shed_out_of_turn(at_limit)
            if at_limit and not self._shed_freed and self.accepting.pause(self._fds):
                continue
            # bjoern has yet to accept (it may be running the app), or to close what was shed
            # (its next read fails): the socket stays readable, and poll() would answer at once.
            time.sleep(min(pause, left))
            pause = min(2 * pause, ACCEPT_PAUSE_MAX_S)

    def _shed_out_of_turn(self, at_limit: bool) -> None:
        """Scan now, shedding the longest-silent connections for those that arrive.

        At the limit, one that frees nothing doubles the wait before the next (every connection
        busy or too fresh: scanning every descriptor again and again would be a busy loop of its
        own). For arrivals below the limit the next scan waits ARRIVALS_SCAN_RATIO times as long
        as this one took: a flood costs the guard a bounded share of a core, whatever the
        number of descriptors.
        """
        shed = self.closed_total["shed"]
        started = time.monotonic()
        self.scan(started)
        done = time.monotonic()
        self._shed_freed = self.closed_total["shed"] > shed
        if at_limit:
            self._shed_gap = SHED_GAP_S if self._shed_freed else min(2 * self._shed_gap, self.scan_interval_s)
            self._shed_at = started + self._shed_gap
        self._arrivals_scan_at = done + max(SHED_GAP_S, ARRIVALS_SCAN_RATIO * (done - started))

    def _at_limit(self) -> bool:
        try:
            os.close(os.dup(self.listen_fd))
            return False
        except OSError:
            return True

    def _fds(self) -> list[int]:
        try:
            return listed_fds()
        except OSError:
            pass
        if self._reserve is not None:
            # EMFILE: listing needs a descriptor, the one held in reserve for it (bjoern, paused
            # or not at the limit, does not take it meanwhile).
            os.close(self._reserve)
            try:
                return listed_fds()
            except OSError:
                pass
            finally:
                self._reserve = open_reserve()
        # None in reserve: probing by path needs none (a readlink per possible number).
        found = []
        for fd in range(self.nofile):
            try:
                os.readlink(f"/proc/self/fd/{fd}")
                found.append(fd)
            except OSError:
                pass
        return found

    def scan(self, now: float) -> int:
        """Check every socket of ours once; return how many descriptors the process held."""
        fds = self._fds()
        seen: dict[int, _Conn] = {}
        live: list[tuple[float, int, int, int]] = []  # (idle_s, fd, inode, pending bytes)
        busy_since = self.busy_since
        busy_s = None if busy_since is None else now - busy_since
        # Busy now or at the last scan (a call that just ended: bjoern is reading the requests
        # that queued behind it, and marks the next call only once it has read it whole).
        worker_held = busy_s is not None or self._busy_last_scan
        self._busy_last_scan = busy_s is not None
        for fd in fds:
            if fd == self.listen_fd:
                continue
            inode = socket_inode(fd)
            if inode is None or inode in self.foreign:
                continue
            conn = self.conns.get(inode)
            if conn is None and not self._is_ours(fd, inode):
                self.foreign.add(inode)
                continue
            info = tcp_info(fd)
            if info is None:
                continue
            state, sent_ago_ms, recv_ago_ms, rx, tx = info
            if conn is None:
                conn = _Conn(fd, 0)
            seen[inode] = conn
            closed_at = self.closing.get(inode)
            if closed_at is not None:  # reset, yet bjoern still holds it
                if now - closed_at >= self.scan_interval_s:
                    act_on_socket(fd, inode, reset_connection)
                continue
            if tx != conn.tx:  # an answer went out: the request is done
                conn.tx, conn.rx_base, conn.pending_since = tx, rx, None
            elif rx > conn.rx_base and conn.pending_since is None:
                conn.pending_since = now
            if state != TCP_ESTABLISHED:
                continue  # closing: bjoern frees it on its own
            idle_s = min(sent_ago_ms, recv_ago_ms) / 1000.0
            if busy_s is not None and abs(idle_s - busy_s) < 1.0:
                continue  # maybe the request the app is running
            pending = rx - conn.rx_base
            if pending > self.max_request_bytes:
                self._close(fd, inode, TOO_LARGE_413, "too_large")
            elif worker_held:
                live.append((idle_s, fd, inode, pending))  # the wait is the worker's, see above
            elif conn.pending_since is not None and now - conn.pending_since >= self.request_timeout_s:
                self._close(fd, inode, TIMEOUT_408, "slow")
            elif idle_s >= self.idle_timeout_s:
                self._close(fd, inode, TIMEOUT_408 if pending else None, "idle")
            else:
                live.append((idle_s, fd, inode, pending))
        self.conns = seen
        self.closing = {inode: at for inode, at in self.closing.items() if inode in seen}
        if len(self.foreign) > 4096:
            self.foreign.clear()
        held = len(fds)
        # Those reset already go as soon as bjoern reads them: counted as held, a scan that came
        # before bjoern's reads (out of turn, soon after the last) would shed as many again from
        # the others, below the low-water mark.
        count = held - len(self.closing)
        if count >= self.high_water:
            live.sort(key=lambda entry: entry[0], reverse=True)
            for idle_s, fd, inode, pending in live:
                if count <= self.low_water or idle_s < SHED_MIN_IDLE_S:
                    break
                # The inode it was listed with, checked again on a duplicate when it is cut.
                self._close(fd, inode, BUSY_503 if pending else None, "shed")
                count -= 1
        return held

    # -- one socket -----------------------------------------------------------------------

    def _is_ours(self, fd: int, inode: int | None = None) -> bool:
        """Accepted on our listening port (the Redis connections have ephemeral local ports)."""
        if inode is not None:
            return bool(act_on_socket(fd, inode, self._is_ours))
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            return False
        try:
            return (
                sock.family in (socket.AF_INET, socket.AF_INET6)
                and sock.type == socket.SOCK_STREAM
                and sock.getsockname()[1] == self.local_port
            )
        except OSError:
            return False
        finally:
            sock.detach()

    def _close(self, fd: int, inode: int, answer: bytes | None, why: str) -> None:
        """Reset the connection, answering first only if no request bytes wait unread."""
        unread = act_on_socket(fd, inode, lambda target: answer_and_reset(target, answer))
        if unread is None:
            return
        self.reset_unread += unread
        self.closing[inode] = time.monotonic()
        self.closed_total[why] += 1
