"""The client's IP address: the one place every route reads it (claims, blocks, registry).

Behind a load balancer (``tracker serve --trust-forwarded``) the socket's peer is the proxy, and
the client's address is in ``X-Forwarded-For``. Each proxy APPENDS the address it received the
request from, so everything left of what our own proxies wrote is whatever the client sent: a
client that sends ``X-Forwarded-For: 10.9.9.9`` gets ``10.9.9.9, REAL`` past HAProxy. Only the
right-most TRUSTED_PROXIES entries were written by proxies we run; the left-most of those is
the address the outermost trusted proxy saw, and that is the client. With one proxy (HAProxy),
it is the right-most entry.

Only ``X-Forwarded-For`` is read, never ``Forwarded``: reading both would let a client pick the
one its proxy does not overwrite.

Behind trusted proxies the tracker fails closed: the socket's peer is a proxy, so it is never
taken for the client. A header it cannot read into the expected address is refused (``client_ip``
raises Refused: 400, one line, counted as ``FIELD``) on every route that reads the address:

- an entry among the right-most TRUSTED_PROXIES that is empty or not an IP address. bjoern
  joins a repeated header's lines WITHOUT a separator (``198.51.100.1`` and ``203.0.113.9``
  arrive as ``198.51.100.1203.0.113.9``), so a client that sends its own line beside a proxy's
  usually lands here; a port must be digits, so a client's ``6.6.6.6:`` glued to the proxy's
  address is refused, not read as 6.6.6.6. Not every glued value is detectable (``2`` before
  ``3.0.113.9`` reads ``23.0.113.9``): the outermost proxy must drop what the client sent, as
  the shipped HAProxy configuration does;
- an empty header, and an ABSENT one: every proxy we run adds it (HAProxy's ``option
  forwardfor`` always does), so a request without it did not come through them, or a proxy is
  misconfigured. Serving it as the peer would make every client of such a proxy one address,
  free of its blocks; refusing says at once what is wrong;
- a header over MAX_HEADER_CHARS whose last MAX_HEADER_CHARS characters do not hold the trusted
  entries whole (only the tail is read: the trusted entries are at the right, and a proxy's
  entry is short).

The access log shows such a request's client as ``unreadable-forwarded-for@PEER`` (``shown``).
"""

from __future__ import annotations

import functools
import ipaddress

from tracker_api.web.errors import Refused

MAX_HEADER_CHARS = 8192  # a longer X-Forwarded-For is not a proxy's: only its tail is read
FIELD = "bad_forwarded_for"  # the refusal counter (the project's stats hash, else tracker:stats)
MAX_PORT_DIGITS = 5


class Unreadable(ValueError):
    """X-Forwarded-For does not hold the address the trusted proxies wrote; str() says why."""


def _port(text: str) -> bool:
    """Whether TEXT is ":PORT" with PORT in ASCII digits, as a proxy writes one."""
    port = text[1:]
    return text[:1] == ":" and 0 < len(port) <= MAX_PORT_DIGITS and port.isascii() and port.isdigit()


@functools.lru_cache(maxsize=4096)
def normalize(text: str) -> str | None:
    """TEXT as a canonical IP address ("::ffff:1.2.3.4" as "1.2.3.4"), or None if it is not one.

    Canonical so that a block on an address matches however a proxy spelled it. A port is
    dropped only when it is digits, and an IPv6 zone ("%eth0") is refused: neither is anything
    a proxy writes, and both would let text around an address pass for it.
    """
    text = text.strip()
    if text.startswith("["):  # "[2001:db8::1]:4711"
        text, closed, rest = text[1:].partition("]")
        if not closed or rest and not _port(rest):
            return None
    elif text.count(":") == 1:  # "192.0.2.1:4711"
        text, colon, port = text.partition(":")
        if not _port(colon + port):
            return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            return None
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    return str(address)


def from_forwarded_for(header: str | None, trusted_proxies: int) -> str:
    """The client's address in an X-Forwarded-For value HEADER (None: absent) written by
    TRUSTED_PROXIES proxies; Unreadable when the header does not hold it (module docstring).

    The TRUSTED_PROXIES-th entry from the right; with fewer entries (a request that did not
    pass every proxy), the left-most, which is still one a trusted proxy wrote. Every entry of
    those right-most ones must be an address: our proxies wrote them all.
    """
    if header is None:
        raise Unreadable("no X-Forwarded-For, and this server takes the client's address only from it")
    entries = header[-MAX_HEADER_CHARS:].split(",")
    if len(header) > MAX_HEADER_CHARS:
        entries = entries[1:]  # the first entry may have been cut
        if len(entries) < trusted_proxies:
            raise Unreadable(
                f"X-Forwarded-For longer than {MAX_HEADER_CHARS} characters without "
                f"{trusted_proxies} entries at its end"
            )
    trusted = entries[-trusted_proxies:]
    addresses = [normalize(entry) for entry in trusted]
    for hop, (entry, address) in enumerate(zip(reversed(trusted), reversed(addresses)), 1):
        if address is None:
            what = "empty" if not entry.strip() else "not an IP address"
            raise Unreadable(
                f"X-Forwarded-For entry {hop} from the right is {what} "
                "(a repeated header's lines arrive joined without a comma)"
            )
    client = addresses[0]
    assert client is not None  # every entry was read above
    return client


def client_ip(req, trusted_proxies: int = 0, project: str | None = None) -> str:
    """The address of the client behind REQ: the socket's peer, or with TRUSTED_PROXIES > 0
    the address the outermost of that many proxies saw (see the module's docstring).

    Refused (400, counted under FIELD in PROJECT's stats when it exists, else globally) when
    behind proxies the header cannot be read: raised before anything is changed, as every
    caller reads the address first."""
    if trusted_proxies <= 0:
        return req.remote_addr or ""
    try:
        return from_forwarded_for(req.get_header("X-Forwarded-For"), trusted_proxies)
    except Unreadable as exc:
        raise Refused(400, str(exc), FIELD, project) from None


def shown(req, trusted_proxies: int = 0) -> str:
    """The client as the access log shows it: client_ip's address, or for a header it cannot
    read ``unreadable-forwarded-for@PEER`` (the proxy that sent it, never the header's text: a
    client wrote part of it)."""
    try:
        return client_ip(req, trusted_proxies) or "-"
    except Refused:
        return f"unreadable-forwarded-for@{req.remote_addr or '-'}"


def throttle_key(ip: str) -> str:
    """What per-address throttles count under: the address, or its /64 for IPv6 (one machine
    commonly holds a whole /64, so counting single IPv6 addresses would throttle nothing)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip[:64]
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((int(address) >> 64 << 64, 64)))
    return str(address)
