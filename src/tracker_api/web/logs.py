"""Set up the standard `logging` of a tracker process: one format, one level, secrets redacted.

Each process command (run, serve, live, maintain) calls ``setup`` once, first thing. Lines go to
stderr as ``TIME LEVEL COMPONENT: message``; the component is the logger's name
(``tracker.server``, ``tracker.maintain``, ``tracker.live``, ``tracker.access``...). Under
systemd (JOURNAL_STREAM set) the time is left out: the journal stamps every line itself.

Redaction sits in the log record factory, not in one handler: every record's message and
traceback are redacted as the record is made, so no handler or formatter added later (a file,
syslog, a test's capture) can ever see a Redis password or a backfeed secret.
"""

from __future__ import annotations

import logging
import os
import sys

from tracker_api.web import redact

ROOT_LOGGER = "tracker"
ACCESS_LOGGER = "tracker.access"
LEVELS = ("debug", "info", "warning", "error")
DEFAULT_LEVEL = "info"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


class RedactedRecord(logging.LogRecord):
    """A log record that never carries a secret: its message is formatted and redacted as it is
    made (msg holds the result, args are emptied: a formatter showing either sees no secret),
    and so are its traceback and stack."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        try:
            message = super().getMessage()
        except (TypeError, ValueError):  # a bad format must not raise into the caller's code
            message = f"{self.msg} {self.args!r}"
        self.msg, self.args = redact.redact(message), ()
        if self.exc_info and self.exc_info[0] is not None:
            # Formatters reuse exc_text when it is set: the raw traceback is never formatted again.
            self.exc_text = redact.redact(logging.Formatter().formatException(self.exc_info))
        if self.stack_info:
            self.stack_info = redact.redact(self.stack_info)


def install_redaction() -> None:
    """Make every log record of this process a RedactedRecord (idempotent)."""
    logging.setLogRecordFactory(RedactedRecord)


def writes_to_journal(stream) -> bool:
    """Whether STREAM is the journal's: systemd sets JOURNAL_STREAM to DEVICE:INODE of the
    stderr it gave the unit; a child whose stderr was sent elsewhere inherits the variable, so
    the stream itself is compared (as systemd's documentation asks)."""
    expected = os.environ.get("JOURNAL_STREAM", "")
    if not expected:
        return False
    try:
        info = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError):  # a StringIO, a closed stream
        return False
    return expected == f"{info.st_dev}:{info.st_ino}"


def line_format(journal: bool) -> str:
    """The format of a line: with the time, unless the journal (JOURNAL) stamps it."""
    fields = "%(levelname)s %(name)s: %(message)s"
    return fields if journal else "%(asctime)s " + fields


def _unwrapped(stream):
    # Records are redacted as they are made: a RedactingStream under them would only redact twice.
    return stream._stream if isinstance(stream, redact.RedactingStream) else stream


def setup(level: str | None = None, access_log: bool = False, stream=None) -> None:
    """Log the `tracker` loggers at LEVEL (default: TRACKER_LOG_LEVEL, else info) to STREAM
    (default stderr), access lines only with ACCESS_LOG. Calling it again replaces the setup."""
    install_redaction()
    level = (level or os.environ.get("TRACKER_LOG_LEVEL") or DEFAULT_LEVEL).upper()
    stream = _unwrapped(stream or sys.stderr)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(line_format(writes_to_journal(stream)), TIME_FORMAT))
    root = logging.getLogger(ROOT_LOGGER)
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False  # a library's basicConfig must not print our lines twice
    # Off: nothing below CRITICAL+1 passes, so the app is built without the access wrapper.
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.INFO if access_log else logging.CRITICAL + 1)


def ensure_setup() -> None:
    """``setup()`` with the defaults, unless this process set its logging up already (a server
    started from Python rather than the CLI still logs its lines, redacted)."""
    if not logging.getLogger(ROOT_LOGGER).handlers:
        setup()


def reset() -> None:
    """Undo ``setup`` (tests): no handler, levels and propagation as logging's defaults."""
    root = logging.getLogger(ROOT_LOGGER)
    for old in list(root.handlers):
        root.removeHandler(old)
    root.setLevel(logging.NOTSET)
    root.propagate = True
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.NOTSET)
