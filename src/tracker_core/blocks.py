"""Blocks: what an entry may be, the lookup index the claim script reads, and a client's IP key.

An entry is ``name:DOWNLOADER`` or ``ip:ADDRESS`` where ADDRESS is an IPv4 or IPv6 address or a
CIDR range (``10.0.0.0/8``, ``2001:db8::/32``). Entries are kept as written after normalising
(``ip:::ffff:10.1.2.3`` is ``ip:10.1.2.3``, ``ip:10.0.0.1/32`` is ``ip:10.0.0.1``), so a block
matches however the address was spelled and lifting it finds it.

A project keeps its own entries (``blocked``) apart from its copy of the global ones
(``blocked_global``), so lifting one never lifts the other. The claim script reads neither: it
reads ``blocked_index``, a score-0 sorted set rebuilt from both sets by set_blocks-4.lua on every
change, holding for each view (``p``: the project's own, ``a``: own and global, for projects
with ``ignore_global_blocked`` off):

- ``VIEWn:NAME`` per blocked name (one ZSCORE);
- ``VIEW4START-END`` / ``VIEW6START-END`` per range of blocked addresses, START and END as
  fixed-width lower-case hex (8 digits for IPv4, 32 for IPv6), ranges merged so none overlap.
  Fixed width makes lexical order numeric order, so the one range that can hold an address is
  the greatest member at or below ``VIEW4ADDR~`` (one ZREVRANGEBYLEX ... LIMIT 0 1), and the
  address is blocked if END >= ADDR. Lua cannot parse addresses: the caller passes ``4ADDR`` or
  ``6ADDR`` (ip_key) and the script only compares strings.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from tracker_core import keyspace

MAX_ENTRY_CHARS = 200


class BadEntry(ValueError):
    """An entry that is not ``ip:ADDRESS``, ``ip:CIDR`` or ``name:DOWNLOADER`` (one-line reason)."""


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """TEXT as a network, IPv4-mapped IPv6 as IPv4; ValueError with a short reason."""
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError:
        # Valid only when host bits may be set: say which network was meant (asking the module
        # again rather than reading its message, whose words are not an interface).
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or CIDR range") from None
        raise ValueError(f"{text} has host bits set (did you mean {loose}?)") from None
    if isinstance(network, ipaddress.IPv6Network):
        mapped = network.network_address.ipv4_mapped
        if mapped is not None and network.prefixlen >= 96:
            network = ipaddress.IPv4Network((int(mapped), network.prefixlen - 96))
    return network


def normalise(entry) -> str:
    """ENTRY in its one spelling, or BadEntry saying why not."""
    if type(entry) is not str or not entry.strip():
        raise BadEntry("empty block entry: use ip:ADDRESS, ip:CIDR or name:DOWNLOADER")
    entry = entry.strip()
    if len(entry) > MAX_ENTRY_CHARS:
        raise BadEntry(f"block entry longer than {MAX_ENTRY_CHARS} characters")
    kind, _, value = entry.partition(":")
    value = value.strip()
    if kind == "name":
        if not keyspace.DOWNLOADER_RE.match(value):
            raise BadEntry(f"bad block entry {entry!r}: a downloader name matches ^[-_a-zA-Z0-9]{{3,30}}$")
        return "name:" + value
    if kind == "ip":
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        try:
            network = _network(value)
        except ValueError as exc:
            raise BadEntry(f"bad block entry {entry!r}: {exc}") from None
        if network.prefixlen == network.max_prefixlen:
            return "ip:" + str(network.network_address)
        return "ip:" + str(network)
    raise BadEntry(f"bad block entry {entry!r}: use ip:ADDRESS, ip:CIDR or name:DOWNLOADER")


def _hex(number: int, version: int) -> str:
    return format(number, "08x" if version == 4 else "032x")


@functools.lru_cache(maxsize=65536)
def ip_key(ip: str) -> str:
    """What the claim script compares for client address IP: '4' + 8 hex digits or '6' + 32;
    '' when IP is not an address (a Unix socket peer), which no IP block matches."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address.version) + _hex(int(address), address.version)


def _view(prefix: str, entries: Iterable[str]) -> list[str]:
    members: list[str] = []
    networks: dict[int, list] = {4: [], 6: []}
    for entry in entries:
        kind, _, value = entry.partition(":")
        if kind == "name":
            members.append(f"{prefix}n:{value}")
        elif kind == "ip":
            try:
                network = _network(value)
            except ValueError:
                continue  # stored before entries were checked: it never matched
            networks[network.version].append(network)
    for version, found in networks.items():
        for network in ipaddress.collapse_addresses(found):
            start = int(network.network_address)
            end = int(network.broadcast_address)
            members.append(f"{prefix}{version}{_hex(start, version)}-{_hex(end, version)}")
    return members


def index_members(own: Iterable[str], global_: Iterable[str]) -> list[str]:
    """The members of ``blocked_index`` for a project's OWN entries and its copy of GLOBAL_."""
    own = set(own)
    return _view("p", own) + _view("a", own | set(global_))
