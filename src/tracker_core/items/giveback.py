"""The one way items the project already had go back into a queue: release of claims, requeue
of dead items, queue moves and redo.

Into a shared queue, an item one of the project's limits matches is held in the limit's
sub-queue instead, like a new one (tracker_core.items.intake): the names are classified at the
project's settings age, the script files the held ones in the way-in set and refuses when the
age moved since (the limits may have changed), and the call is made again with the limits read
anew; the last attempt does not check, so a stream of limit changes cannot stop a give-back
(maintenance's reclassify follows up). Then hold_new files the held items. A downloader's own
queue takes every item as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from tracker_core import keyspace, scripts
from tracker_core.project import pattern_limits
from tracker_core.scripts.requests import ReleaseReply

ATTEMPTS = 3
ReplyT = TypeVar("ReplyT")  # what the script call returns: a reply tuple or a count
STALE_AGE = pattern_limits.STALE_AGE  # a script's code when the caller classified at another age


def reply_code(reply) -> int:
    """The code of a script reply: the number itself, or the first field of a list or tuple."""
    return int(reply[0]) if isinstance(reply, (list, tuple)) else int(reply)


def fresh_limits(
    conn, k: keyspace.ProjectKeys
) -> Callable[[], tuple[str, pattern_limits.CompiledLimits | None]]:
    """A classifier for give_back that reads the age and the limits from Redis on every attempt
    (the admin paths; the hot path passes its cached ones)."""
    return lambda: pattern_limits.current(conn, k)


def give_back(
    conn,
    k: keyspace.ProjectKeys,
    names: Sequence[str],
    call: Callable[[str, list[str]], ReplyT],
    *,
    owner: str = "",
    classify: Callable[[], tuple[str, pattern_limits.CompiledLimits | None]] | None = None,
    held_filed: Callable[[ReplyT, list[str]], bool] | None = None,
    again: Callable[[ReplyT], bool] | None = None,
    on_stale: Callable[[ReplyT], None] | None = None,
    attempts: int = ATTEMPTS,
) -> ReplyT:
    """Give NAMES back through CALL(age, held) -> the script's reply, and return that reply.

    HELD is, per name, "LIMIT\\0NAME" when a limit matches it and '' otherwise (all '' for
    OWNER's own queue); AGE is the settings age they were classified at ('' on the last
    attempt: no check). CLASSIFY() -> (age, compiled limits) defaults to a fresh read. A reply
    AGAIN(reply) says changed nothing and asks for another try (default: its code is STALE_AGE;
    a script without an age check never answers that) is retried after ON_STALE(reply); the
    caller sees the last reply, which may still ask again when attempts ran out.
    HELD_FILED(reply, held) says whether the script filed held items (by default: a positive
    count and any held entry); then hold_new files them.
    """
    classify = classify or fresh_limits(conn, k)
    held: list[str] = []
    for attempt in range(attempts):
        age, compiled = classify()
        held = [""] * len(names) if owner else pattern_limits.held_entries(compiled, list(names))
        reply = call("" if attempt == attempts - 1 else age, held)
        if not (again or is_stale)(reply):
            break
        if on_stale is not None:
            on_stale(reply)
    if (held_filed or _count_with_held)(reply, held):
        pattern_limits.hold_new(conn, k)
    return reply


def is_stale(reply) -> bool:
    """Whether a list reply refused for a stale settings age (a count reply never does)."""
    return isinstance(reply, (list, tuple)) and reply_code(reply) == STALE_AGE


def _count_with_held(reply, held: list[str]) -> bool:
    return not isinstance(reply, (list, tuple)) and int(reply) > 0 and any(held)


def release(
    conn,
    k: keyspace.ProjectKeys,
    holder: str,
    names: Sequence[str],
    *,
    now_ms: int,
    classify: Callable[[], tuple[str, pattern_limits.CompiledLimits | None]] | None = None,
    on_stale: Callable[[object], None] | None = None,
) -> ReleaseReply:
    """Give back the claims of NAMES held by HOLDER ('' = whoever holds them): to todo, or held
    when a limit matches them. The warriors' /release (Engine.release, with its cached limits
    as CLASSIFY) and the admins' claims.release both come here."""
    return give_back(
        conn,
        k,
        names,
        lambda age, held: scripts.release(
            conn, k, now_ms=now_ms, downloader=holder, age=age, items=names, held=held
        ),
        classify=classify,
        on_stale=on_stale,
        held_filed=lambda reply, held: reply.code == scripts.release.codes.OK and reply.held > 0,
    )
