"""How far `tracker items add` got, on stderr: bytes of a file, or a count and rate for a stream.

For a file of known size: ``12.0 MB of 48.0 MB (25%)``; for standard input (no size): ``120,000
items (45,210 items/s)``; at the end one line with the items per second of the whole run. On a
terminal each update rewrites the line (\\r); otherwise (``--progress`` into a file or pipe)
each is a line of its own, and updates come at most every INTERVAL_S so a log stays short.
stdout is never written: ``--json`` output stays parseable.
"""

from __future__ import annotations

import time

INTERVAL_S = 0.5


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # not reached


class Progress:
    """Updates for one run over LABEL (`slug:queue`): call ``update`` per batch, ``finish`` once."""

    def __init__(self, stream, label: str, size_bytes: int | None, read_bytes=None):
        self.stream = stream
        self.label = label
        self.size_bytes = size_bytes or None  # an empty or unsized source counts items instead
        self.read_bytes = read_bytes  # how many bytes of the file were read so far
        self.terminal = stream.isatty()
        self.started = time.monotonic()
        self.shown_at: float | None = None
        self.items = 0
        self.finished = False

    def _rate(self) -> float:
        return self.items / max(time.monotonic() - self.started, 1e-6)

    def line(self) -> str:
        """The update as it reads now."""
        if self.size_bytes and self.read_bytes is not None:
            done = min(self.read_bytes(), self.size_bytes)
            where = f"{_bytes(done)} of {_bytes(self.size_bytes)} ({100 * done // self.size_bytes}%)"
        else:
            where = f"{self.items:,} items ({self._rate():,.0f} items/s)"
        return f"adding to {self.label}: {where}"

    def update(self, items: int) -> None:
        """ITEMS lines taken so far; shown on the first call, then at most every INTERVAL_S."""
        self.items = items
        now = time.monotonic()
        if self.shown_at is not None and now - self.shown_at < INTERVAL_S:
            return
        self.shown_at = now
        self._write(self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        # Stopped by a refusal: end the rewritten line, so the error gets a line of its own.
        if self.terminal and self.shown_at is not None and not self.finished:
            self.stream.write("\n")
            self.stream.flush()

    def finish(self) -> None:
        """The closing line: items and items per second over the whole run."""
        self.finished = True
        elapsed = time.monotonic() - self.started
        self._write(
            f"took {self.items:,} items into {self.label} in {elapsed:.1f} s: {self._rate():,.0f} items/s"
        )
        if self.terminal:
            self.stream.write("\n")
        self.stream.flush()

    def _write(self, text: str) -> None:
        if self.terminal:
            self.stream.write("\r\x1b[K" + text)  # back to the start of the line, cleared
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
