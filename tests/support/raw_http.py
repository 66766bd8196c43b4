"""Raw HTTP over a loopback socket: what a server sends back, and when it closes."""

from __future__ import annotations

import socket
import time


def read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float | None]:
    """Everything the server sends, and after how many seconds it closed (None: still open)."""
    started = time.monotonic()
    got = b""
    while True:
        left = limit_s - (time.monotonic() - started)
        if left <= 0:
            return got, None
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return got, None
        except ConnectionResetError:
            return got, time.monotonic() - started
        if not chunk:
            return got, time.monotonic() - started
        got += chunk


def status_line(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]
