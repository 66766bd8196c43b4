"""Pause a bjoern worker's accepting at the descriptor limit, and resume it.

Owns AcceptPause: the listening socket taken out of the epoll set of bjoern's loop (libev) and put
back exactly as it was registered. The connection guard (connguard.py) decides when.
"""

from __future__ import annotations

import ctypes
import os
import platform
import select

from tracker_api.connections.worker_sockets import LIBC, listed_fds

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
        for epoll_fd in self._epoll_fds(listed_fds()):
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
            if LIBC.epoll_ctl(epoll_fd, _EPOLL_CTL_DEL, self.listen_fd, None) == 0:
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
        LIBC.epoll_ctl(self.paused_in, _EPOLL_CTL_ADD, self.listen_fd, ctypes.byref(event))
        self.paused_in = None  # EEXIST too: the loop has put it back itself
