"""Read and act on a bjoern worker's sockets from the kernel's side, never through bjoern.

Owns the primitives the connection guard (connguard.py) and the body cap (bodycap.py) build on:
listing the process's descriptors (`/proc/self/fd`), reading a socket's `TCP_INFO` and its unread
bytes (FIONREAD), resetting a connection without closing the descriptor bjoern owns, and acting
on a duplicate whose inode is checked, so that a number bjoern closed and reused meanwhile is
never touched. Imports nothing of the project.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import resource
import socket
import struct
import termios

LIBC = ctypes.CDLL(None, use_errno=True)
_UNSPEC_ADDR = ctypes.create_string_buffer(16)  # struct sockaddr, sa_family = AF_UNSPEC

TCP_INFO_LEN = 232
TCP_ESTABLISHED = 1
# Offsets in struct tcp_info (linux/tcp.h), stable since Linux 4.19.
_OFF_LAST_DATA_SENT = 44
_OFF_LAST_DATA_RECV = 52
_OFF_BYTES_RECEIVED = 128
_OFF_BYTES_SENT = 200


def reset_connection(fd: int) -> None:
    """Reset the connection under FD without closing the descriptor (bjoern owns it).

    connect() to AF_UNSPEC disconnects a TCP socket: the peer gets RST and bjoern's next read
    fails, so bjoern closes it. A shutdown() is not enough against a client still sending: the
    kernel keeps taking its data for bjoern to read and the body goes on to its end.
    """
    LIBC.connect(fd, _UNSPEC_ADDR, 16)


def answer_and_reset(fd: int, answer: bytes | None) -> bool:
    """Send ANSWER (if any) and reset, unless request bytes wait unread; True if some did.

    Bytes queued unread may be a whole request, which is not the client's fault: then no answer
    at all, just the reset (the kernel drops them, so bjoern can never read and run them).
    """
    unread = unread_bytes(fd)
    if answer is not None and not unread:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fileno=fd)
        try:
            sock.send(answer, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            pass
        finally:
            sock.detach()
    reset_connection(fd)
    return bool(unread)


def http_answer(status: str, extra_headers: str = "") -> bytes:
    """A whole one-line HTTP answer that closes the connection."""
    reason = f"{status}\n".encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(reason)}\r\n"
        f"Connection: close\r\n{extra_headers}\r\n"
    ).encode() + reason


def listed_fds() -> list[int]:
    """This process's descriptors, listed (which needs one free: OSError at the limit)."""
    return [int(name) for name in os.listdir("/proc/self/fd")]


def open_reserve() -> int | None:
    """A descriptor held only to be given up when the process has none left; None if none."""
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


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


def unread_bytes(fd: int) -> int:
    """Bytes the kernel holds for this socket that bjoern has not read (SIOCINQ = FIONREAD)."""
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:
        return 1  # unknown: act as if a request may be waiting (reset, no answer)


def socket_inode(fd: int) -> int | None:
    """The inode of the socket under FD, read by path (needs no descriptor); None if no socket."""
    try:
        link = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    if not link.startswith("socket:["):
        return None
    return int(link[8:-1])


def tcp_info(fd: int) -> tuple[int, int, int, int, int] | None:
    """(state, ms since data sent, ms since data received, bytes received, bytes sent)."""
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


def act_on_socket(fd: int, inode: int, action):
    """Run ACTION on a duplicate of FD checked to be socket INODE; None if FD was reused.

    bjoern, running without the GIL, may close the number and accept a new client on it (or the
    worker's Redis client reconnect on it) between the listing and the act. At the descriptor
    limit no duplicate can be made and shedding must still work: then the check is by path and
    the act on the number, the one place a reuse can still slip in.
    """
    try:
        dup = _dup_if_same(fd, inode)
    except OSError:
        return action(fd) if socket_inode(fd) == inode else None
    if dup is None:
        return None
    try:
        return action(dup)
    finally:
        os.close(dup)
