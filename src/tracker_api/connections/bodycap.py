"""Cap request bodies while bjoern buffers them, before the app's own checks can run.

bjoern stores a body in `io.BytesIO()` objects it makes itself: it looks the class up by name on
the `io` module it imported when its loop started, and calls `.write(chunk)` per 64 KB read. So
a worker hands bjoern a stand-in `io` module whose `BytesIO`, when bjoern (and only bjoern) calls
it, makes a `CappedBody`: past `max_body_bytes` it keeps nothing more and marks itself
`too_large`; past the worker's budget for all unfinished bodies together it marks itself `busy`.
Memory per worker is therefore bounded by the budget whatever Content-Length is claimed. The app
wrapper answers such a request 413 (or 503, retry) without calling the app; the connection guard
usually stops the transfer well before that (connguard.py).

A request whose Content-Length is already past the cap is answered 413 at its first body bytes,
not once the body is whole (it may never be: a short body would wait for the guard's request
timeout and get 408). See "413 as soon as the head says so" below.

`write()` must not raise (bjoern would drop a NULL result), so a refusal is a mark, not an error.
The real `io` module is put back in `sys.modules` on the first request.
"""

from __future__ import annotations

import _ctypes
import ctypes
import io
import itertools
import logging
import os
import socket
import sys
import sysconfig
import threading
import time
import types

import orjson

from tracker_api.connections.worker_sockets import LIBC, reset_connection
from tracker_core import keyspace

_REAL_IO = io
log = logging.getLogger("tracker.server")
REFUSAL_FIELD = "bad_too_large"  # what a body past the cap is counted under (errors.count_refusal)
_count = None  # count(project or None, field), as run_capped was given it


_write = io.BytesIO.write
# Past this a released body's buffer is emptied at once (an admin upload of up to 64 MB); a
# small one is freed when bjoern drops the request, after its answer.
_TRUNCATE_FROM_BYTES = 64 << 10


class CappedBody(io.BytesIO):
    limit_bytes = 64 << 20
    budget_bytes = 128 << 20
    buffered_total = 0  # bytes held by every unfinished body of this worker
    # Each body's own state, as class defaults until its first write: bjoern makes one body per
    # request, and a Python __init__ would cost a tenth of the budget for a warrior's request.
    kept = 0
    refusal: str | None = None
    # Set by run_capped in a worker: look at the declared length at each body's first write.
    answer_early = False

    def write(self, chunk) -> int:
        n = len(chunk)
        if self.refusal is None:
            kept = self.kept + n
            if kept > self.limit_bytes or (not self.kept and self.answer_early and _refused_early(self)):
                self.refusal = "too_large"
            elif CappedBody.buffered_total + n > self.budget_bytes:
                self.refusal = "busy"
            else:
                self.kept = kept
                CappedBody.buffered_total += n
                return _write(self, chunk)
        self._release()
        return n  # dropped: the request is answered 413/503 without its body

    def _release(self) -> None:
        """Stop counting this body to the budget (the app has read it, or it was refused)."""
        kept = self.kept
        if kept:
            CappedBody.buffered_total -= kept
            self.kept = 0
            if kept >= _TRUNCATE_FROM_BYTES or self.refusal is not None:
                self.seek(0)
                self.truncate()

    def __del__(self):
        if self.kept:
            CappedBody.buffered_total -= self.kept


def _stand_in_io(server_code) -> types.ModuleType:
    """An `io` module that differs from the real one only in BytesIO, and only for bjoern.

    bjoern calls BytesIO from C inside its loop, so the calling Python frame is the one that
    started the loop (SERVER_CODE); any other caller gets the real class.
    """
    module = types.ModuleType("io")
    module.__dict__.update(_REAL_IO.__dict__)

    def BytesIO(*args, **kwargs):
        if not args and not kwargs and sys._getframe(1).f_code is server_code:
            return CappedBody()
        return _REAL_IO.BytesIO(*args, **kwargs)

    module.__dict__["BytesIO"] = BytesIO
    return module


def run_capped(sock, app, max_body_bytes: int, budget_bytes: int, guard=None, count=None) -> None:
    """Run bjoern on SOCK with APP, bodies capped at MAX_BODY_BYTES (BUDGET_BYTES in all);
    COUNT(project, field) counts a body refused for its size (errors.count_refusal)."""
    import _bjoern

    CappedBody.limit_bytes = max_body_bytes
    CappedBody.budget_bytes = max(budget_bytes, max_body_bytes)
    CappedBody.answer_early = _EARLY_ANSWER_SUPPORTED
    global _count
    _count = count
    wrapped = _wrap(app, guard)
    sys.modules["io"] = _stand_in_io(_serve_loop.__code__)
    _serve_loop(_bjoern, sock, wrapped)


def _serve_loop(_bjoern, sock, app) -> None:
    _bjoern.server_run(sock, app)  # bjoern imports `io` here, then loops until stopped


_BUSY_REASON = "too many large bodies being received, retry later"


def _refusal_answer(path: str, refusal: str) -> tuple[str, list, bytes]:
    """(status, headers, body) of a body refused for REFUSAL ("too_large" or "busy") on PATH:
    one line of text, or JSON on backfeed paths (grab scripts decode every backfeed answer)."""
    if refusal == "too_large":
        status, reason = (
            "413 Content Too Large",
            f"request body too large (limit {CappedBody.limit_bytes} bytes)",
        )
    else:
        status, reason = "503 Service Unavailable", _BUSY_REASON
    if path.startswith("/backfeed/"):
        kind, text = "application/json", orjson.dumps({"status_code": int(status[:3]), "reason": reason})
    else:
        kind, text = "text/plain", reason.encode() + b"\n"
    headers = [("Content-Type", kind), ("Content-Length", str(len(text)))]
    if refusal == "busy":
        headers.append(("Retry-After", "5"))
    return status, headers, text


def _count_too_large(path: str) -> None:
    """Count a body refused for its size: in the stats of the project PATH names, if it exists
    (errors.count_refusal checks), else globally."""
    if _count is None:
        return
    first = path[1:].partition("/")[0]
    _count(first if keyspace.valid_project_name(first) else None, REFUSAL_FIELD)


def _wrap(app, guard):
    def capped(environ, start_response):
        if guard is not None:
            # First of all: from here on the guard must not time this request out (it has been
            # read whole and runs now; a 408 for it could reach a client whose request ran).
            guard.busy_since = time.monotonic()
        if sys.modules.get("io") is not _REAL_IO:
            sys.modules["io"] = _REAL_IO  # bjoern holds the stand-in already
        body = environ.get("wsgi.input")
        refusal = getattr(body, "refusal", None)
        if refusal is not None:
            path = environ.get("PATH_INFO", "")
            status, headers, text = _refusal_answer(path, refusal)
            # bjoern writes the Connection header itself (from what the client asked).
            start_response(status, headers)
            if refusal == "too_large":
                _count_too_large(path)
            if guard is not None:
                guard.busy_since = None
            return [text]
        if guard is None:
            return app(environ, start_response)
        try:
            return app(environ, start_response)
        finally:
            guard.busy_since = None
            if body is not None and getattr(body, "kept", 0) > 0:
                body._release()  # the app has read it: no longer counts to the budget

    return capped


# -- 413 as soon as the head says so ---------------------------------------------------------------
#
# bjoern gives Python no hook between a request's head and its body: it calls in only when the
# first body bytes arrive (BytesIO(), then write()) and once the body is whole (the app). So at a
# body's first write the cap reads the declared Content-Length from the request's environ dict,
# and past the cap answers 413 on the connection itself and resets it (as the guard does), the
# refusal counted like the app's. Neither the dict nor the connection is handed to write(); both
# are found where bjoern has just left them:
# - the dict: bjoern has just stored the body in it (on_body), which made CPython's collector
#   start tracking it, last in its youngest generation: right after the body, tracked when made.
#   One pointer read (the body's PyGC_Head) finds it, then checked to be a dict holding the body.
# - the connection: bjoern's `Request` is on the C stack (ev_io_on_read -> Request_parse ->
#   on_body -> write), a few KB below the top in a worker. A word of the stack is taken for it
#   only when the struct it points to (read through the kernel, so a word that is no pointer
#   cannot fault) has the parser's back pointer to itself, the dict as its headers and the same
#   descriptor in client_fd and in its watcher. The offsets are bjoern 3.2.2's (LP64). The
#   first search reads up to a few hundred structs (about a millisecond); after it, one.
# With either not found (another CPython, another bjoern build) the body is refused as before:
# nothing kept, and the guard's request timeout closes the connection (logged once).
# A head with no body bytes yet calls no Python at all: it waits for them, or for that timeout.

_GC_HEAD_BYTES = 16  # PyGC_Head (_gc_next, _gc_prev), just before every tracked object
_OB_TYPE = 8
_REQUEST_BYTES = 176  # sizeof(Request)
_PARSER_DATA = 24  # Request.parser.parser.data: the Request itself
_WATCHER_FD = 48 + 40  # Request.ev_watcher.fd
_CLIENT_FD = 104  # Request.client_fd
_HEADERS = 136  # Request.headers: the environ dict being filled
_STACK_SCAN_BYTES = 64 << 10  # from the top: bjoern's frames are about 8 KB down in a worker
_EARLY_ANSWER_SUPPORTED = (
    sys.implementation.name == "cpython"
    and (3, 11) <= sys.version_info[:2] <= (3, 13)
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
    and ctypes.sizeof(ctypes.c_void_p) == 8
)
_word = ctypes.c_size_t.from_address
# An object from its address: _ctypes' own (0.1 us) where it has one, else ctypes.cast (0.8 us):
# this runs for every body.
_object_at = getattr(_ctypes, "PyObj_FromPtr", None) or (
    lambda address: ctypes.cast(address, ctypes.py_object).value
)
_stack: tuple[int, int] | None = None
_found_at: list[int] = []  # depths below the stack's top where a Request was found
_pipe: tuple[int, int] | None = None
_warned: set[str] = set()


def _refused_early(body: CappedBody) -> bool:
    """At BODY's first write: True when its request declared a body past the cap, after
    answering it 413 and resetting the connection when that connection could be found."""
    environ = _environ_of(body)
    if environ is None:
        return _not_early("the request's environ was not found")
    try:
        declared = int(environ.get("HTTP_CONTENT_LENGTH", ""))
    except ValueError:
        return False  # chunked: the cap counts the bytes as they come
    if declared <= CappedBody.limit_bytes:
        return False
    path = environ.get("PATH_INFO", "")
    fd = _client_fd_of(environ)
    if fd is None:
        _not_early("bjoern's request was not found on the stack")
        return True
    _count_too_large(path)  # before the answer: a refusal a client has seen is counted
    status, headers, text = _refusal_answer(path, "too_large")
    head = "".join(f"{name}: {value}\r\n" for name, value in headers)
    try:  # bjoern's sockets are non-blocking: what the send buffer cannot take is not sent
        os.write(fd, f"HTTP/1.1 {status}\r\n{head}Connection: close\r\n\r\n".encode() + text)
    except OSError:
        pass  # the client is gone: the reset below is all there is to do
    # The rest of the stream is this body by its own framing, never another request, and it is
    # not read: a TCP connection is reset (queued bytes dropped, later ones refused), a Unix one
    # (which connect cannot reset) shut down; bjoern's next read fails and it closes it.
    reset_connection(fd)
    LIBC.shutdown(fd, socket.SHUT_RDWR)
    return True


def _not_early(why: str) -> bool:
    if why not in _warned:
        _warned.add(why)
        log.warning("no early 413 for a Content-Length past the cap (%s): the request timeout closes it", why)
    return False


def _environ_of(body: CappedBody) -> dict | None:
    """The environ dict bjoern is filling for BODY's request (the object the collector tracks
    right after BODY), or None."""
    following = _word(id(body) - _GC_HEAD_BYTES).value  # PyGC_Head._gc_next; 0: untracked
    if not following or _word(following + _GC_HEAD_BYTES + _OB_TYPE).value != id(dict):
        return None
    environ = _object_at(following + _GC_HEAD_BYTES)
    return environ if environ.get("wsgi.input") is body else None


def _client_fd_of(environ: dict) -> int | None:
    """The socket of the bjoern Request filling ENVIRON, found on the main thread's C stack."""
    global _stack
    if threading.current_thread() is not threading.main_thread():
        return None  # bjoern runs in a worker's main thread; another stack is not looked for
    if _stack is None:
        _stack = _main_stack()
    low, top = _stack
    words = ctypes.string_at(max(low, top - _STACK_SCAN_BYTES), min(top - low, _STACK_SCAN_BYTES))
    size = len(words)
    # Where it was found before first: the path from main() to bjoern's frames is the same for
    # every request of a worker, so after the first search this is one look.
    for depth in itertools.chain(_found_at, range(8, size + 1, 8)):
        pointer = int.from_bytes(words[size - depth : size - depth + 8], "little")
        if pointer < 1 << 16 or pointer & 7 or low <= pointer < top:
            continue  # not a pointer to a struct in the heap
        fd = _request_fd(pointer, id(environ))
        if fd is not None:
            if depth not in _found_at:
                _found_at.append(depth)
            return fd
    return None


def _request_fd(address: int, environ_id: int) -> int | None:
    """The client_fd of the bjoern Request at ADDRESS filling the dict ENVIRON_ID, else None."""
    raw = _peek(address, _REQUEST_BYTES)
    if raw is None:
        return None
    word = int.from_bytes
    client_fd = int.from_bytes(raw[_CLIENT_FD : _CLIENT_FD + 4], "little", signed=True)
    if (
        word(raw[_PARSER_DATA : _PARSER_DATA + 8], "little") == address
        and word(raw[_HEADERS : _HEADERS + 8], "little") == environ_id
        and client_fd >= 0
        and raw[_WATCHER_FD : _WATCHER_FD + 4] == raw[_CLIENT_FD : _CLIENT_FD + 4]
    ):
        return client_fd
    return None


def _peek(address: int, size: int) -> bytes | None:
    """SIZE bytes at ADDRESS, or None where they are not readable (a word of the stack that
    is no pointer): copied by the kernel through a pipe, which fails with EFAULT, never faults."""
    global _pipe
    if _pipe is None:
        _pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    if LIBC.write(_pipe[1], ctypes.c_void_p(address), size) != size:
        return None  # a write below PIPE_BUF bytes to an empty pipe is all or nothing
    return os.read(_pipe[0], size)


def _main_stack() -> tuple[int, int]:
    """The main thread's stack mapping (low, top) from /proc/self/maps; only its low end moves
    (down, as it grows), so the first one read stays safe to read."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.endswith(" [stack]\n"):
                low, top = line.split(" ", 1)[0].split("-")
                return int(low, 16), int(top, 16)
    return 0, 0
