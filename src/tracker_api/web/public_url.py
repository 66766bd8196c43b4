"""The tracker's public base URL: what the absolute links it hands out (projects.json's leaderboard
URLs, also in every warrior's heartbeat answer) are built from.

The operator sets it (`tracker serve --public-url https://tracker.example.org`, or
TRACKER_PUBLIC_URL); it is checked at start (``validate``) and the request's Host header is then
never read. Without it the Host header is used only when it is a plain host[:port] (a name, an
IPv4 address or a bracketed IPv6 address, and a port); anything else (a header with a path, a
user, quotes or markup in it, or none) gives links relative to the tracker (``/PROJECT/``), so a
forged Host can never put a URL of its own shape into the document. A Host that *is* a valid name
still comes back as sent to the client that sent it: only a configured URL keeps another domain
out of the document altogether (docs/operations.md, "Public URL").
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

MAX_HOST_CHARS = 253 + len(":65535")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PORT_RE = re.compile(r"[0-9]{1,5}")


def valid_host(host: str) -> bool:
    """Whether HOST is a plain host[:port]: a DNS name or IPv4 address, or [IPv6], and a port
    from 1 to 65535."""
    if not host or len(host) > MAX_HOST_CHARS:
        return False
    if host.startswith("["):
        address, bracket, rest = host[1:].partition("]")
        if not bracket or "%" in address:  # an IPv6 zone names this machine's interface
            return False
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return False
        if not rest:
            return True
        if not rest.startswith(":"):
            return False
        port = rest[1:]
    else:
        name, colon, port = host.partition(":")
        if not _NAME_RE.fullmatch(name) or len(name) > 253:
            return False
        if not colon:
            return True
    return bool(_PORT_RE.fullmatch(port)) and 1 <= int(port) <= 65535


def validate(url: str) -> str:
    """URL as the base of the links (no trailing slash), "" for none; ValueError with a one-line
    reason unless it is http(s)://HOST[:PORT][/PATH] with no user, query or fragment."""
    url = url.strip()
    if not url:
        return ""
    # urlsplit drops tabs and newlines silently: "exa\tmple.org" would pass as another host.
    if not url.isascii() or not url.isprintable() or " " in url:
        raise ValueError("must be one line of printable ASCII without spaces")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    if "@" in parts.netloc:
        raise ValueError("must not hold a user or password")
    if not valid_host(parts.netloc):
        raise ValueError(f"{parts.netloc!r} is not a host name or address with an optional port")
    if parts.query or url.endswith("?"):
        raise ValueError("must not have a query (?...)")
    if parts.fragment or "#" in url:
        raise ValueError("must not have a fragment (#...)")
    if any(c in parts.path for c in "\"'<>\\"):
        raise ValueError("the path must not hold quotes, angle brackets or backslashes")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def base_url(public_url: str, scheme: str, host: str | None) -> str:
    """The base of the links for a request with SCHEME and the Host header HOST: the configured
    PUBLIC_URL, else SCHEME://HOST when HOST is a plain host[:port], else "" (relative links)."""
    if public_url:
        return public_url
    if host is not None and valid_host(host):
        return f"{scheme}://{host}"
    return ""
