"""Input checks every verb shares: each raises BadInput with a one-line reason before any change.

The bounds here are the admin layer's (the faces show them in their help and errors).
"""

from __future__ import annotations

from tracker_core import keyspace
from tracker_core.admin.errors import BadInput
from tracker_core.compiled import protocol

MAX_PAGE = 10_000
MAX_SAMPLE = 1000
MAX_CURSOR = 2**64 - 1  # Redis SCAN cursors are unsigned 64-bit numbers
MAX_PATTERN_CHARS = 1000  # Redis globs (move, claims) and limit patterns
MAX_ITEM_CHARS = protocol.MAX_ITEM_CHARS  # what /done accepts back
MAX_DOWNLOADER_CHARS = 100
MAX_AGE_S = 10 * 365 * 86400  # release by age: ten years covers any claim
QUEUE_NAMES = "todo, backfeed, secondary, redo or downloader:NAME"


def text(value, name: str, max_chars: int, empty_ok: bool = False) -> str:
    if type(value) is not str:
        raise BadInput(f"{name!r} must be a string")
    if not value and not empty_ok:
        raise BadInput(f"{name!r} must not be empty")
    if len(value) > max_chars:
        raise BadInput(f"{name!r} must be at most {max_chars} characters")
    return value


def flag(value, name: str) -> bool:
    if type(value) is not bool:
        raise BadInput(f"{name!r} must be true or false")
    return value


def cursor(value, name: str = "cursor") -> int:
    if type(value) is not int or not 0 <= value <= MAX_CURSOR:
        raise BadInput(f"{name!r} must be an integer from 0 to {MAX_CURSOR}")
    return value


def page(count) -> int:
    """A page size, clamped to 1..MAX_PAGE."""
    if type(count) is not int:
        raise BadInput(f"page size must be an integer from 1 to {MAX_PAGE}")
    return max(1, min(count, MAX_PAGE))


def item(name, n: int) -> str:
    """Item name number N (from 1) as a queue takes it: 1 to MAX_ITEM_CHARS characters, no NUL.

    NUL joins the names of a multi claim and separates them in segment files, and a longer
    name could be claimed but never reported done.
    """
    if type(name) is not str or not 0 < len(name) <= MAX_ITEM_CHARS or "\0" in name:
        raise BadInput(f"item {n}: must be a string of 1 to {MAX_ITEM_CHARS} characters without NUL")
    return name


def items(names) -> list[str]:
    """A list of item names, each checked by item()."""
    if type(names) is not list:
        raise BadInput("'items' must be a list of strings")
    for n, name in enumerate(names):
        item(name, n + 1)
    return names


def some_items(names, most: int = MAX_PAGE) -> list[str]:
    """1 to MOST item names."""
    items(names)
    if not names or len(names) > most:
        raise BadInput(f"give 1 to {most} item names")
    return names


def queue(name) -> str:
    """A queue name as the faces take it; downloader:NAME needs a valid downloader name."""
    if type(name) is not str:
        raise BadInput("queue must be a string")
    queue_and_owner(keyspace.ProjectKeys("any"), name[:200])
    return name


def queue_and_owner(k: keyspace.ProjectKeys, name: str) -> tuple[str, str]:
    """(key, owning downloader or '') of queue NAME in K's project (keys.py's one parser)."""
    if type(name) is not str:
        raise BadInput("queue must be a string")
    try:
        return k.queue_and_owner(name)
    except ValueError as exc:
        raise BadInput(f"{exc}: use {QUEUE_NAMES}") from None
