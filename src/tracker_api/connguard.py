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

Per connection, once per scan (every `scan_interval_s`, much faster under fd pressure):
- silent both ways for `idle_timeout_s`: closed (408 first if a request was under way);
- a request received in part, unanswered for `request_timeout_s` (a drip-fed slowloris, a
  Content-Length larger than the body, an upgrade bjoern never answers): 408 and closed;
- more unanswered bytes than `max_request_bytes`: 413 and closed (bodies are also capped in
  memory as they arrive, see bodycap.py, so this only stops the transfer early);
- when the process nears its descriptor limit: the longest-silent connections are shed so that
  bjoern's `accept()` finds a descriptor and never spins.

The connection whose request the app is running right now is never touched: the app wrapper
marks when a call started, and that connection has been silent for as long as the call.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
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


_LIBC = ctypes.CDLL(None, use_errno=True)
_UNSPEC_ADDR = ctypes.create_string_buffer(16)  # struct sockaddr, sa_family = AF_UNSPEC


def _abort(fd: int) -> None:
    """Reset the connection under FD without closing the descriptor (bjoern owns it).

    connect() to AF_UNSPEC disconnects a TCP socket: the peer gets RST and bjoern's next read
    fails, so bjoern closes it. A shutdown() is not enough against a client still sending: the
    kernel keeps taking its data for bjoern to read and the body goes on to its end.
    """
    _LIBC.connect(fd, _UNSPEC_ADDR, 16)


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

    def start(self) -> ConnectionGuard:
        threading.Thread(target=self._run, name="connguard", daemon=True).start()
        return self

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self.listen_fd, select.POLLIN)
        next_scan = 0.0
        tight = False
        while True:
            try:
                now = time.monotonic()
                if now >= next_scan:
                    # Near the limit: watch the listening socket rather than the clock.
                    tight = self.scan(now) >= self.low_water
                    next_scan = now + (0.02 if tight else self.scan_interval_s)
                if not tight:
                    time.sleep(max(0.0, next_scan - time.monotonic()))
                    continue
                # Under pressure: wake on every pending connection; if bjoern cannot take it
                # (no descriptor left) shed now instead of letting it spin until the next scan.
                wait_ms = max(0, int((next_scan - time.monotonic()) * 1000))
                if poller.poll(wait_ms) and self._at_limit():
                    next_scan = 0.0
                else:
                    time.sleep(0.002)
            except Exception:  # the guard must never die and leave the worker unguarded
                time.sleep(self.scan_interval_s)

    def _at_limit(self) -> bool:
        try:
            os.close(os.dup(self.listen_fd))
            return False
        except OSError:
            return True

    def _fds(self) -> list[int]:
        try:
            return [int(name) for name in os.listdir("/proc/self/fd")]
        except OSError:
            # EMFILE: listing needs a descriptor; probing by path does not.
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
        held = count = len(fds)
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
