"""The client's IP address: the one place every route reads it (claims, blocks, registry).

Behind a load balancer (``tracker serve --trust-forwarded``) the socket's peer is the proxy, and
the client's address is in ``X-Forwarded-For``. Each proxy APPENDS the address it received the
request from, so everything left of what our own proxies wrote is whatever the client sent: a
client that sends ``X-Forwarded-For: 10.9.9.9`` gets ``10.9.9.9, REAL`` past HAProxy. Only the
right-most TRUSTED_PROXIES entries were written by proxies we run; the left-most of those is
the address the outermost trusted proxy saw, and that is the client. With one proxy (HAProxy),
it is the right-most entry.

Only ``X-Forwarded-For`` is read, never ``Forwarded``: reading both would let a client pick the
one its proxy does not overwrite. An entry that is not an IP address (a misconfigured proxy) is
not trusted: the socket's peer is used instead, so nothing a client writes is ever stored or
matched against blocks unchecked.
"""

from __future__ import annotations

import functools
import ipaddress

MAX_HEADER_CHARS = 8192  # a longer X-Forwarded-For is not a proxy's: only its tail is read


@functools.lru_cache(maxsize=4096)
def normalize(text: str) -> str | None:
    """TEXT as a canonical IP address ("::ffff:1.2.3.4" as "1.2.3.4"), or None if it is not one.

    Canonical so that a block on an address matches however a proxy spelled it.
    """
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[2001:db8::1]:4711"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "192.0.2.1:4711"
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def from_forwarded_for(header: str, trusted_proxies: int) -> str | None:
    """The client's address in an X-Forwarded-For value HEADER written by TRUSTED_PROXIES
    proxies, or None if that entry is not an IP address.

    The TRUSTED_PROXIES-th entry from the right; with fewer entries (a request that did not
    pass every proxy), the left-most, which is still one a trusted proxy wrote.
    """
    entries = header[-MAX_HEADER_CHARS:].split(",")
    if len(header) > MAX_HEADER_CHARS:
        entries = entries[1:] or entries  # the first entry may have been cut
    hop = entries[-min(trusted_proxies, len(entries))]
    return normalize(hop)


def client_ip(req, trusted_proxies: int = 0) -> str:
    """The address of the client behind REQ: the socket's peer, or with TRUSTED_PROXIES > 0
    the address the outermost of that many proxies saw (see the module's docstring)."""
    peer = req.remote_addr or ""
    if trusted_proxies > 0:
        header = req.get_header("X-Forwarded-For")
        if header:
            forwarded = from_forwarded_for(header, trusted_proxies)
            if forwarded is not None:
                return forwarded
    return peer


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
