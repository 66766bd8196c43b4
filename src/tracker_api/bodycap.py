"""Cap request bodies while bjoern buffers them, before the app's own checks can run.

bjoern stores a body in `io.BytesIO()` objects it makes itself: it looks the class up by name on
the `io` module it imported when its loop started, and calls `.write(chunk)` per 64 KB read. So
a worker hands bjoern a stand-in `io` module whose `BytesIO`, when bjoern (and only bjoern) calls
it, makes a `CappedBody`: past `max_body_bytes` it keeps nothing more and marks itself
`too_large`; past the worker's budget for all unfinished bodies together it marks itself `busy`.
Memory per worker is therefore bounded by the budget whatever Content-Length is claimed. The app
wrapper answers such a request 413 (or 503, retry) without calling the app; the connection guard
usually stops the transfer well before that (connguard.py).

`write()` must not raise (bjoern would drop a NULL result), so a refusal is a mark, not an error.
The real `io` module is put back in `sys.modules` on the first request.
"""

from __future__ import annotations

import io
import sys
import time
import types

import orjson

_REAL_IO = io


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

    def write(self, chunk) -> int:
        n = len(chunk)
        if self.refusal is None:
            kept = self.kept + n
            if kept > self.limit_bytes:
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

    module.BytesIO = BytesIO
    return module


def run_capped(sock, app, max_body_bytes: int, budget_bytes: int, guard=None) -> None:
    """Run bjoern on SOCK with APP, bodies capped at MAX_BODY_BYTES (BUDGET_BYTES in all)."""
    import _bjoern

    CappedBody.limit_bytes = max_body_bytes
    CappedBody.budget_bytes = max(budget_bytes, max_body_bytes)
    wrapped = _wrap(app, guard)
    sys.modules["io"] = _stand_in_io(_serve_loop.__code__)
    _serve_loop(_bjoern, sock, wrapped)


def _serve_loop(_bjoern, sock, app) -> None:
    _bjoern.server_run(sock, app)  # bjoern imports `io` here, then loops until stopped


_TOO_LARGE = (b"request body too large\n", "413 Content Too Large")
_BUSY = (b"too many large bodies being received, retry later\n", "503 Service Unavailable")


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
            text, status = _TOO_LARGE if refusal == "too_large" else _BUSY
            kind = "text/plain"
            if environ.get("PATH_INFO", "").startswith("/backfeed/"):
                # Grab scripts decode every backfeed answer as JSON (errors.answer).
                text = orjson.dumps({"status_code": int(status[:3]), "reason": text.decode().strip()})
                kind = "application/json"
            # bjoern writes the Connection header itself (from what the client asked).
            headers = [("Content-Type", kind), ("Content-Length", str(len(text)))]
            if refusal == "busy":
                headers.append(("Retry-After", "5"))
            start_response(status, headers)
            if guard is not None:
                guard.busy_since = None
            return [text]
        if guard is None:
            return app(environ, start_response)
        try:
            return app(environ, start_response)
        finally:
            guard.busy_since = None
            if body is not None and getattr(body, "kept", 0):
                body._release()  # the app has read it: no longer counts to the budget

    return capped
