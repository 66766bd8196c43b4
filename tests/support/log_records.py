"""Log records of one logger, caught on the logger itself: the app's log setup (tracker_api.web.logs)
stops "tracker" propagating, so pytest's caplog, on the root logger, may see nothing."""

from __future__ import annotations

import contextlib
import logging


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def captured(name: str):
    """The messages logged to logger NAME (and below it) while the block runs."""
    records = Records()
    logger = logging.getLogger(name)
    logger.addHandler(records)
    try:
        yield records.messages
    finally:
        logger.removeHandler(records)
