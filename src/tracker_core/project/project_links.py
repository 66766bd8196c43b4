"""The links a project's page shows: its repository and its logo, http(s) URLs only.

A project admin sets them (settings ``repository_url`` and ``logo_url``; the older projects.json
fields ``repository`` and ``logo`` stand in while those are empty), and a public page shows them,
so each is checked again where it is read: anything but a plain http(s) URL (a ``javascript:``
link, a data URL, spaces or quotes smuggled in) is dropped rather than shown. The logo's origin
is what the page's Content-Security-Policy lets images come from, beside its own.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MAX_URL_CHARS = 500
# Scheme and host as a browser's CSP source expression reads them: nothing to escape.
_ORIGIN_RE = re.compile(r"\Ahttps?://[A-Za-z0-9.-]+(:[0-9]{1,5})?\Z")
_UNSAFE_RE = re.compile(r"[\s\"'<>\\`\x00-\x1f\x7f]")


def http_url(value: str) -> str:
    """VALUE when it is an http(s) URL with a plain host name, within MAX_URL_CHARS; '' stays ''.

    Raises ValueError (a one-line reason) otherwise: the settings' validator."""
    if not value:
        return ""
    if len(value) > MAX_URL_CHARS:
        raise ValueError(f"must be at most {MAX_URL_CHARS} characters")
    if _UNSAFE_RE.search(value):
        raise ValueError("must be a URL without spaces, quotes or control characters")
    if origin(value) is None:
        raise ValueError("must be an http:// or https:// URL, like https://example.org/logo.png")
    return value


def origin(url: str) -> str | None:
    """scheme://host[:port] of an http(s) URL (None for anything else)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc or "@" in parts.netloc:
        return None
    candidate = f"{parts.scheme}://{parts.netloc}"
    return candidate if _ORIGIN_RE.match(candidate) else None


def safe_url(value: str | None) -> str:
    """VALUE if it passes http_url, else '' (what a page may show)."""
    try:
        return http_url(value or "")
    except ValueError:
        return ""


def public_links(values: dict) -> dict[str, str]:
    """repository_url and logo_url of project settings VALUES, each '' unless a safe URL."""
    return {
        "repository_url": safe_url(values.get("repository_url")) or safe_url(values.get("repository")),
        "logo_url": safe_url(values.get("logo_url")) or safe_url(values.get("logo")),
    }
