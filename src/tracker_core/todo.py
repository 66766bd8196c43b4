"""The to-do breakdown of a project: every place an item waits to be served, counted in one place.

stats.json, the leaderboard page, the front page, /metrics, the backlog samples (the trend and
the ETA) and `tracker maintain`'s upkeep all read it here, so they agree: the shared queues,
items held back by a limit ("limited", in their sub-queue or on their way in), the downloaders'
own queues ("downloader"; the first DOWNLOADER_QUEUES_COUNTED of them, so a page never reads a
huge set: `tracker status` counts them all) and the queued items offloaded to segment files
("offloaded", counted as `tracker status` counts them: registered segments that came from a
queue, plus the set staged on its way to one; done items offloaded are not to do).
"""

from __future__ import annotations

from tracker_core import keys as keyspace

DOWNLOADER_QUEUES_COUNTED = 1000
# As in tracker_core.offload (not imported: offload pulls in the filesystem side).
DONE_SOURCE = "done"
STAGED_FIELD = "#staged"


def _text(value) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _hash(reply) -> dict[str, str]:
    """A HGETALL reply as {field: value}: RawRedis gives a flat list, redis-py a dict."""
    if isinstance(reply, dict):
        pairs = reply.items()
    elif isinstance(reply, (list, tuple)):
        pairs = zip(reply[::2], reply[1::2])
    else:
        return {}  # an error reply (a key of another type): count nothing from it
    return {_text(f): _text(v) for f, v in pairs}


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def offloaded_queued(segments: dict[str, str], sources: dict[str, str], staged_items: int) -> int:
    """Queued items offloaded, as `tracker status` counts them.

    SEGMENTS is the segments hash (number -> items; '#' fields are bookkeeping), SOURCES the
    segment_queues hash (number -> the queue it came from, todo when missing; '#staged' is
    "NUMBER SOURCE" for the set in `offloading`), STAGED_ITEMS that set's size.
    """
    total = sum(
        _int(n)
        for number, n in segments.items()
        if not number.startswith("#") and sources.get(number, "todo") != DONE_SOURCE
    )
    staged_source = sources.get(STAGED_FIELD, "0 todo").partition(" ")[2] or "todo"
    return total + (staged_items if staged_source != DONE_SOURCE else 0)


def commands(k: keyspace.ProjectKeys) -> list[tuple]:
    """The commands whose replies sizes() reads, to pipeline with a caller's own."""
    return [
        ("SCARD", k.todo),
        ("SCARD", k.backfeed),
        ("SCARD", k.secondary),
        ("SCARD", k.redo),
        ("ZCARD", k.limited),
        ("SCARD", k.limited_in),
        ("HGETALL", k.segments),
        ("HGETALL", k.segment_queues),
        ("SCARD", k.offloading),
        ("SRANDMEMBER", k.downloader_queues, DOWNLOADER_QUEUES_COUNTED),
    ]


N_COMMANDS = 10  # len(commands(k)): a caller pipelining its own commands after them


def owners(replies: list) -> list:
    """The downloaders whose own queues to count (the last of commands()'s replies)."""
    found = replies[N_COMMANDS - 1]
    return list(found) if isinstance(found, (list, tuple)) else []


def sizes(replies: list, own_sizes: list) -> dict[str, int]:
    """{place: items} from the replies to commands() and the SCARDs of owners()' queues."""
    (todo, backfeed, secondary, redo, limited, limited_in, segments, sources, staged_items) = replies[
        : N_COMMANDS - 1
    ]
    return {
        "todo": _int(todo),
        "backfeed": _int(backfeed),
        "secondary": _int(secondary),
        "redo": _int(redo),
        "limited": _int(limited) + _int(limited_in),
        "downloader": sum(_int(n) for n in own_sizes),
        "offloaded": offloaded_queued(_hash(segments), _hash(sources), _int(staged_items)),
    }


def read(run, k: keyspace.ProjectKeys) -> dict[str, int]:
    """The breakdown of K's project; RUN(commands) returns their replies (a pipeline)."""
    replies = run(commands(k))
    found = owners(replies)
    return sizes(replies, run([("SCARD", k.downloader_queue(o)) for o in found]) if found else [])


def total(counts: dict) -> int:
    """Items still to do: the sum of the breakdown (Engine.counts' "queues")."""
    return sum(counts["queues"].values())
