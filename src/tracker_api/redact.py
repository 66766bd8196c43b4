"""Take secrets out of text before it reaches a log: one helper for every print and log path.

What a log line can carry that must never be kept: a Redis password (`redis://:PASS@host`,
`redis://user:PASS@host`, `rediss://...`, sentinel and cluster URLs alike), a backfeed secret
(the part after the last `-` of `/backfeed/legacy/PROJECT-SECRET`, raw or percent-encoded, as the
app decodes the path before routing it), an admin token (after `Bearer` or bare, `trk_ID_SECRET`)
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
    # the secret after the project's last '-' in a backfeed path (secrets never hold '-'), each
    # character raw or %XX and of any length: a partial or encoded secret is still secret.
    (re.compile(r"(/backfeed/legacy/[^\s?#/]*(?:-|%2[dD]))(?:[A-Za-z0-9]|%[0-9A-Fa-f]{2})+"), r"\1" + MASK),
    (re.compile(r"(?i)(bearer\s+)[^\s,;]+"), r"\1" + MASK),
    # a bare admin token (tracker_core.tokens: trk_ID_SECRET): the id names the token in the
    # admin lists and stays; the secret goes, whatever its length (a partial one is still secret).
    (re.compile(r"(trk_[0-9a-f]{12}_)[A-Za-z0-9_-]+"), r"\1" + MASK),
    (re.compile(r"(?i)((?:password|passwd|secret|token|requirepass)[=:]\s*)[^\s&;,]+"), r"\1" + MASK),
)

# A token with percent-escapes (a raw request path as a log prints it). Falcon decodes the whole
# path before routing, so `/backfeed%2Flegacy/P-%61bc` reaches the backfeed route too.
_ENCODED_TOKEN = re.compile(r"[^\s\"'<>]*%[0-9A-Fa-f]{2}[^\s\"'<>]*")


def _redact_encoded_token(match: re.Match) -> str:
    token = match.group(0)
    decoded = unquote(token)
    if "/backfeed/legacy/" not in decoded or "/backfeed/legacy/" in token:
        return token  # nothing hidden by the encoding (raw paths: the patterns)
    # The log keeps the decoded form: mapping the mask back onto the escapes is not worth it.
    return redact(decoded)


def _may_hold_secret(text: str) -> bool:
    """False only when no pattern above could match: what each needs, found by substring tests
    (much cheaper than the regexes, and most log lines, an access line for a claim say, hold
    none of it)."""
    if "@" in text or "/backfeed/legacy/" in text or "%" in text or "trk_" in text:
        return True
    low = text.casefold()  # as (?i) matches: the long s "ſ" is an "s" to both
    return "bearer" in low or "pass" in low or "secret" in low or "token" in low


def redact(text: str) -> str:
    """Return TEXT with every known kind of secret replaced by ***."""
    if not isinstance(text, str):
        text = str(text)
    return _redact_all(text) if _may_hold_secret(text) else text


def _redact_all(text: str) -> str:
    """redact() without the shortcut: every pattern tried."""
    if "%" in text:
        text = _ENCODED_TOKEN.sub(_redact_encoded_token, text)
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
