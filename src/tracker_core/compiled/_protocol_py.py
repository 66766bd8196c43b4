"""Per-request protocol checks: the readable twin of ``_protocol_c.pyx`` (same signatures)."""

from __future__ import annotations

# Bytes one done may report, all domains together. The done script handles counts as Lua
# numbers, which print in exponent form from 1e14 on: Redis then refuses them as integers in the
# middle of the script. 10 TB per item is far above any real one.
MAX_DONE_BYTES = 10**13
MAX_DOMAINS = 32  # domains per done: each becomes a field of the project's domain_bytes


def valid_downloader(name) -> bool:
    """Tell whether NAME matches ^[-_a-zA-Z0-9]{3,30}$ over the whole string."""
    if type(name) is not str or not 3 <= len(name) <= 30:
        return False
    for ch in name:
        if not ("a" <= ch <= "z" or "A" <= ch <= "Z" or "0" <= ch <= "9" or ch == "-" or ch == "_"):
            return False
    return True


def version_key(version: str) -> tuple:
    """Turn a script version into a tuple of its numbers: '20240102.01' -> (20240102, 1)."""
    numbers = []
    current = -1
    for ch in version:
        if "0" <= ch <= "9":
            current = (0 if current < 0 else current * 10) + (ord(ch) - 48)
        elif current >= 0:
            numbers.append(current)
            current = -1
    if current >= 0:
        numbers.append(current)
    return tuple(numbers)


def version_older(version: str, minimum: str) -> bool:
    """Tell whether VERSION is older than MINIMUM, comparing numbers ('9' < '20240101.02')."""
    return version_key(version) < version_key(minimum)


def split_items(text: str, max_items: int, max_length: int):
    """Split NUL-joined item names; None when there are too many or one is too long or empty.

    A trailing NUL is allowed (clients join with one); an empty name elsewhere is bad input.
    """
    if not text:
        return None
    names = text.split("\0")
    if names[-1] == "" and len(names) > 1:
        names.pop()
    if len(names) > max_items:
        return None
    for name in names:
        if not name or len(name) > max_length:
            return None
    return names


def flatten_bytes(value):
    """Turn {"domain": bytes, ...} into [domain, bytes, ...]; None when it is malformed.

    Malformed: not an object, more than MAX_DOMAINS domains, an empty or over-long domain, a
    count that is not a non-negative integer, or counts summing to MAX_DONE_BYTES or more.
    """
    if type(value) is not dict or len(value) > MAX_DOMAINS:
        return None
    flat = []
    total = 0
    for domain, count in value.items():
        if type(count) is not int or count < 0 or count >= MAX_DONE_BYTES:
            return None
        if not domain or len(domain) > 100:
            return None
        total += count
        flat.append(domain)
        flat.append(count)
    if total >= MAX_DONE_BYTES:
        return None
    return flat
