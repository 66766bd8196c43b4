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
pauses bjoern's accepting (see AcceptPause) until a descriptor frees: the waiting connections
stay queued in the kernel instead of bjoern spinning on them.

The connection whose request the app is running right now is never touched: the app wrapper
marks when a call started, and that connection has been silent for as long as the call.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import math
import os
import platform
import resource
import select
import socket
import struct
import termios
import threading
import time

TCP_INFO_LEN = 232
_ESTABLISHED = 1
# Offsets in struct tcp_info (linux/tcp.h), stable since Linux 4.19.
_OFF_LAST_DATA_SENT = 44
_OFF_LAST_DATA_RECV = 52
_OFF_BYTES_RECEIVED = 128
_OFF_BYTES_SENT = 200

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


_LIBC = ctypes.CDLL(None, use_errno=True)
_UNSPEC_ADDR = ctypes.create_string_buffer(16)  # struct sockaddr, sa_family = AF_UNSPEC


def _abort(fd: int) -> None:
    """Reset the connection under FD without closing the descriptor (bjoern owns it).

    connect() to AF_UNSPEC disconnects a TCP socket: the peer gets RST and bjoern's next read
    fails, so bjoern closes it. A shutdown() is not enough against a client still sending: the
    kernel keeps taking its data for bjoern to read and the body goes on to its end.
    """
    _LIBC.connect(fd, _UNSPEC_ADDR, 16)


_EPOLL_CTL_ADD = 1
_EPOLL_CTL_DEL = 2


class _EpollEvent(ctypes.Structure):
    _pack_ = 4 if platform.machine() == "x86_64" else 8  # packed on x86-64 only (sys/epoll.h)
    _fields_ = [("events", ctypes.c_uint32), ("data", ctypes.c_uint64)]


class AcceptPause:
    """Stop bjoern accepting on its listening socket, and let it start again.

    At the descriptor limit bjoern's `accept()` fails (EMFILE) while the socket stays readable,
    and its loop (libev, epoll) spins. Taking the socket out of the loop's epoll set stops that;
    the connections wait in the kernel's queue. It goes back as it was registered (events and
    data): libev keeps a generation count in the data and, seeing another, rebuilds its whole
    epoll set (harmless with a descriptor free, as on resuming, but not at the limit: abort).
    The registration is read from /proc/self/fdinfo beforehand, while descriptors are free;
    when it could not be (a worker started at the limit, its socket's queue full), libev's
    first registration of the socket is assumed.
    """

    def __init__(self, listen_fd: int):
        self.listen_fd = listen_fd
        self.registration: tuple[int, _EpollEvent] | None = None  # (epoll fd, as registered)
        self.paused_in: int | None = None  # the epoll set the socket was taken out of

    @property
    def paused(self) -> bool:
        return self.paused_in is not None

    def find(self) -> bool:
        """Read how the loop's epoll set watches the listening socket; False if not (yet)."""
        for epoll_fd in self._epoll_fds(_listed_fds()):
            try:
                with open(f"/proc/self/fdinfo/{epoll_fd}") as info:
                    lines = info.read().splitlines()
            except OSError:
                continue
            for line in lines:  # "tfd: FD events: HEX data: HEX pos:..."
                fields = line.split()
                if fields[:2] == ["tfd:", str(self.listen_fd)] and fields[2:5:2] == ["events:", "data:"]:
                    self.registration = (epoll_fd, _EpollEvent(int(fields[3], 16), int(fields[5], 16)))
                    return True
        return False

    @staticmethod
    def _epoll_fds(fds) -> list[int]:
        found = []
        for fd in fds:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventpoll]":
                    found.append(fd)
            except OSError:
                pass
        return found

    def pause(self, list_fds) -> bool:
        """Take the socket out of the loop; False if that cannot be done (then bjoern spins).
        LIST_FDS lists the descriptors, for when the registration was never read."""
        if self.paused:
            return True
        known = [self.registration[0]] if self.registration else []
        for epoll_fd in known or self._epoll_fds(list_fds()):
            # ENOENT from any other epoll set: only the loop's watches the listening socket.
            if _LIBC.epoll_ctl(epoll_fd, _EPOLL_CTL_DEL, self.listen_fd, None) == 0:
                self.paused_in = epoll_fd
                return True
        self.registration = None  # the loop has another epoll set: read it again
        return False

    def resume(self) -> None:
        if not self.paused:
            return
        if self.registration is not None and self.registration[0] == self.paused_in:
            event = self.registration[1]
        else:  # libev's first: the descriptor, generation 1 in the upper half
            event = _EpollEvent(select.EPOLLIN, self.listen_fd | 1 << 32)
        _LIBC.epoll_ctl(self.paused_in, _EPOLL_CTL_ADD, self.listen_fd, ctypes.byref(event))
        self.paused_in = None  # EEXIST too: the loop has put it back itself


def _listed_fds() -> list[int]:
    """This process's descriptors, listed (which needs one free: OSError at the limit)."""
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _open_reserve() -> int | None:
    """A descriptor held only to be given up when the process has none left; None if none."""
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _unread_bytes(fd: int) -> int:
    """Bytes the kernel holds for this socket that bjoern has not read (SIOCINQ = FIONREAD)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 1  # unknown: act as if a request may be waiting (reset, no answer)


def _dup_if_same(fd: int, inode: int) -> int | None:
    """A duplicate of FD if it still is socket INODE, else None (the number was reused).

    Raises OSError(EMFILE) at the descriptor limit, where no duplicate can be made.
    """
    try:
        dup = os.dup(fd)
    except OSError as error:
        if error.errno in (errno.EMFILE, errno.ENFILE):
            raise
        return None  # EBADF: closed since it was listed
    try:
        if os.fstat(dup).st_ino == inode:
            return dup
    except OSError:
        pass
    os.close(dup)
    return None


def _answer(status: str, extra: str = "") -> bytes:
    reason = f"{status}\n".encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(reason)}\r\n"
        f"Connection: close\r\n{extra}\r\n"
    ).encode() + reason


TIMEOUT_408 = _answer("408 Request Timeout")
TOO_LARGE_413 = _answer("413 Content Too Large")
BUSY_503 = _answer("503 Service Unavailable", "Retry-After: 5\r\n")


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (no privilege needed); return the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= hard:
        return soft if soft != resource.RLIM_INFINITY else hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ValueError, OSError):
        return soft


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
        self._reserve = _open_reserve()
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
            return _listed_fds()
        except OSError:
            pass
        if self._reserve is not None:
            # EMFILE: listing needs a descriptor, the one held in reserve for it (bjoern, paused
            # or not at the limit, does not take it meanwhile).
            os.close(self._reserve)
            try:
                return _listed_fds()
            except OSError:
                pass
            finally:
                self._reserve = _open_reserve()
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
            inode = self._socket_inode(fd)
            if inode is None or inode in self.foreign:
                continue
            conn = self.conns.get(inode)
            if conn is None and not self._is_ours(fd, inode):
                self.foreign.add(inode)
                continue
            info = self._tcp_info(fd)
            if info is None:
                continue
            state, sent_ago_ms, recv_ago_ms, rx, tx = info
            if conn is None:
                conn = _Conn(fd, 0)
            seen[inode] = conn
            closed_at = self.closing.get(inode)
            if closed_at is not None:  # reset, yet bjoern still holds it
                if now - closed_at >= self.scan_interval_s:
                    self._act(fd, inode, _abort)
                continue
            if tx != conn.tx:  # an answer went out: the request is done
                conn.tx, conn.rx_base, conn.pending_since = tx, rx, None
            elif rx > conn.rx_base and conn.pending_since is None:
                conn.pending_since = now
            if state != _ESTABLISHED:
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

    @staticmethod
    def _socket_inode(fd: int) -> int | None:
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        if not link.startswith("socket:["):
            return None
        return int(link[8:-1])

    def _is_ours(self, fd: int, inode: int | None = None) -> bool:
        """Accepted on our listening port (the Redis connections have ephemeral local ports)."""
        if inode is not None:
            return bool(self._act(fd, inode, self._is_ours))
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

    @staticmethod
    def _tcp_info(fd: int):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fileno=fd)
        try:
            raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
        except OSError:
            return None
        finally:
            sock.detach()
        if len(raw) < _OFF_BYTES_SENT + 8:
            return None
        return (
            raw[0],
            struct.unpack_from("I", raw, _OFF_LAST_DATA_SENT)[0],
            struct.unpack_from("I", raw, _OFF_LAST_DATA_RECV)[0],
            struct.unpack_from("Q", raw, _OFF_BYTES_RECEIVED)[0],
            struct.unpack_from("Q", raw, _OFF_BYTES_SENT)[0],
        )

    def _act(self, fd: int, inode: int, action):
        """Run ACTION on a duplicate of FD checked to be socket INODE; None if FD was reused.

        At the descriptor limit no duplicate can be made and shedding must still work: then the
        check is by path and the act on the number, the one place a reuse can still slip in.
        """
        try:
            dup = _dup_if_same(fd, inode)
        except OSError:
            return action(fd) if self._socket_inode(fd) == inode else None
        if dup is None:
            return None
        try:
            return action(dup)
        finally:
            os.close(dup)

    def _close(self, fd: int, inode: int, answer: bytes | None, why: str) -> None:
        """Reset the connection, answering first only if no request bytes wait unread."""

        def close(target: int) -> bool:
            unread = _unread_bytes(target)
            if answer is not None and not unread:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fileno=target)
                try:
                    sock.send(answer, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
                except OSError:
                    pass
                finally:
                    sock.detach()
            _abort(target)
            return bool(unread)

        result = self._act(fd, inode, close)
        if result is None:
            return
        self.reset_unread += result
        self.closing[inode] = time.monotonic()
        self.closed_total[why] += 1
