"""The access log: one line per request on the `tracker.access` logger, when it is switched on.

A line reads ``METHOD PATH STATUS DURATIONms CLIENT``: the path without its query string (where
tokens could be), redacted (a backfeed path of any shape carries the project's secret:
redact.hide_backfeed masks it, and logs.py's record factory redacts the whole line), with
control characters escaped so that a request cannot forge a line; the client is the address
client_ip.py takes (X-Forwarded-For only behind --trust-forwarded; a header it cannot read shows
as ``unreadable-forwarded-for@PEER``). The duration runs until the app returned its response (a
streamed body is sent after). Requests that bodycap or the connection guard answer themselves
(413, 408) never reach the app and are not logged here.

Switched off (the default, see the README), ``wrap`` returns the app itself: no cost at all.
"""

from __future__ import annotations

import logging
import time

from tracker_api.web import client_ip, logs, redact

log = logging.getLogger(logs.ACCESS_LOGGER)

MAX_PATH_CHARS = 1024  # an item name in a path may be long; the line stays readable


class _Peer:
    """What client_ip.client_ip reads of a request, from the WSGI environ (its one rule)."""

    __slots__ = ("remote_addr", "_forwarded")

    def __init__(self, environ):
        self.remote_addr = environ.get("REMOTE_ADDR", "127.0.0.1")  # as falcon's Request has it
        self._forwarded = environ.get("HTTP_X_FORWARDED_FOR")

    def get_header(self, _name):
        return self._forwarded


def shown_path(environ) -> str:
    """The request's path as the log shows it: decoded as the app routes it, no query string,
    a backfeed secret masked, at most MAX_PATH_CHARS, every control character escaped."""
    path = environ.get("PATH_INFO") or "/"
    if not path.isascii():  # WSGI hands the path over as latin-1 text of its UTF-8 bytes
        path = path.encode("latin-1", "replace").decode("utf-8", "replace")
    # Here, where the whole path is known to be one field: the record's redaction reads a line,
    # where a space (%20 in the path) would end the path and leave the rest of a secret shown.
    path = redact.hide_backfeed(path)
    if len(path) > MAX_PATH_CHARS:
        path = path[:MAX_PATH_CHARS] + "..."
    if not path.isprintable():
        path = path.encode("unicode_escape").decode("ascii")
    return path


def wrap(app, trusted_proxies: int = 0):
    """APP with one access line logged per request, or APP itself while the log is off."""
    if not log.isEnabledFor(logging.INFO):
        return app

    def wsgi(environ, start_response):
        started = time.perf_counter()
        status = ["-"]

        def recording_start_response(status_line, headers, exc_info=None):
            status[0] = status_line[:3]
            return start_response(status_line, headers, exc_info)

        try:
            return app(environ, recording_start_response)
        finally:
            ms = (time.perf_counter() - started) * 1000.0
            line = (
                f"{environ.get('REQUEST_METHOD', '-')} {shown_path(environ)} {status[0]} {ms:.1f}ms "
                f"{client_ip.shown(_Peer(environ), trusted_proxies)}"
            )
            # makeRecord + handle: log.info would look up its caller's frame (a third of the
            # cost) for a line that never shows it. The record is redacted as it is made.
            log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, line, (), None))

    wsgi.falcon_app = getattr(app, "falcon_app", app)  # type: ignore[attr-defined]  # read by the tests
    return wsgi
