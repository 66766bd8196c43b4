"""Take secrets out of text before it reaches a log: one helper for every print and log path.

What a log line can carry that must never be kept: a Redis password (`redis://:PASS@host`,
`redis://user:PASS@host`, `rediss://...`, sentinel and cluster URLs alike), a backfeed secret
(everything after `/backfeed/` but the `legacy/PROJECT-` of `/backfeed/legacy/PROJECT-SECRET`,
whatever the path's shape: any case, repeated or percent-encoded slashes, no dash, a query
string; see `hide_backfeed`), an admin token (after `Bearer` or bare, `trk_ID_SECRET`)
and a `password=`, `secret=` or `token=` parameter. `install()` wraps the process's stderr and stdout
so that tracebacks, the framework's error log and C-level Python error prints pass through it
too (bjoern takes `sys.stderr` as the WSGI error stream when its loop starts).
"""

from __future__ import annotations

import re
import sys
from urllib.parse import unquote

MASK = "***"

_PATTERNS = (
    # scheme://[user]:PASSWORD@host -> keep the user, hide the password. The password runs to
    # the LAST '@' of the authority: a raw '@' in it (redis-py accepts one) must not leak the rest.
    (re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)[^\s/?#]+@"), r"\1" + MASK + "@"),
    (re.compile(r"(?i)(bearer\s+)[^\s,;]+"), r"\1" + MASK),
    # a bare admin token (tracker_core.access.tokens: trk_ID_SECRET): the id names the token in the
    # admin lists and stays; the secret goes, whatever its length (a partial one is still secret).
    (re.compile(r"(trk_[0-9a-f]{12}_)[A-Za-z0-9_-]+"), r"\1" + MASK),
    (re.compile(r"(?i)((?:password|passwd|secret|token|requirepass)[=:]\s*)[^\s&;,]+"), r"\1" + MASK),
)

# Where a backfeed path's secret starts: a "backfeed" path segment and its slashes (raw or
# %2F, any number, any case), then what the endpoint's own shape keeps readable: "legacy/" and
# the project up to its last dash (names are [a-z0-9_-], secrets never hold "-"). Everything
# after is masked, whatever it is: a secret with no dash before it, a partial one, an encoded
# one, a query string. Not under an admin path's queue named "backfeed" (/queues/backfeed/items),
# which holds no secret; a longer name ending in "backfeed" is not the segment either.
_SEP = r"(?:/|%2f)+"
_BACKFEED_HEAD = re.compile(
    rf"(?i)(?<![a-z0-9_.-])(?<!queues/)backfeed{_SEP}(?:legacy{_SEP}(?:[a-z0-9_-]*(?:-|%2d))?)?"
)
# A token that may hold one: a path or URL as a log prints it (a space, quote or bracket ends it).
_PATH_TOKEN = re.compile(r"(?i)[^\s\"'<>]*(?:backfeed|%[0-9a-f]{2})[^\s\"'<>]*")
_MAX_UNQUOTES = 3  # a doubly encoded path does not route, but may still hold a real secret


def hide_backfeed(path: str) -> str:
    """PATH with everything after its backfeed head masked (``_BACKFEED_HEAD``), spaces and all
    (the access log's path field); unchanged when no backfeed segment is in it, raw or once
    its percent-escapes are decoded (Falcon decodes the whole path before routing, so
    `/backfeed%2Flegacy/P-%61bc` reaches the backfeed route too)."""
    found = _BACKFEED_HEAD.search(path)
    decoded = path
    for _ in range(_MAX_UNQUOTES):
        if found is not None or "%" not in decoded:
            break
        decoded = unquote(decoded)
        found = _BACKFEED_HEAD.search(decoded)
        if found is not None:
            # The log keeps the decoded form: mapping the mask onto the escapes is not worth it.
            path = decoded
    if found is None or found.end() == len(path):
        return path
    return path[: found.end()] + MASK


def _hide_backfeed_token(match: re.Match) -> str:
    return hide_backfeed(match.group(0))


def _may_hold_secret(text: str) -> bool:
    """False only when no pattern above could match: what each needs, found by substring tests
    (much cheaper than the regexes, and most log lines, an access line for a claim say, hold
    none of it)."""
    if "@" in text or "%" in text or "trk_" in text:
        return True
    low = text.casefold()  # as (?i) matches: the long s "ſ" is an "s", the Kelvin sign a "k"
    return "backfeed" in low or "bearer" in low or "pass" in low or "secret" in low or "token" in low


def redact(text: object) -> str:
    """Return TEXT (as a str) with every known kind of secret replaced by ***."""
    line = text if isinstance(text, str) else str(text)
    return _redact_all(line) if _may_hold_secret(line) else line


def _redact_all(text: str) -> str:
    """redact() without the shortcut: every pattern tried."""
    text = _PATH_TOKEN.sub(_hide_backfeed_token, text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingStream:
    """A text stream that redacts each write before passing it on (everything else delegated)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text) -> int:
        if not isinstance(text, str):
            # As a text stream does: click probes with write(b"") to tell text from binary
            # streams, and would print bytes reprs ("b'...'") if this accepted them.
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """Redact everything this process writes through sys.stderr and sys.stdout (idempotent)."""
    for name in ("stderr", "stdout"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
