"""Where every item of a project is, counted in one place.

At any moment each item is in exactly one place: a shared queue (todo, backfeed, secondary,
redo), held back by a limit ("limited": in its sub-queue or on its way in), a downloader's own
queue, offloaded to a segment file (or staged on its way to one), out (claimed), dead, or done
(kept in the done set, offloaded to a segment, or only counted). Every view reads it here, so
they agree:

- the to-do breakdown (``read``/``sizes``, Engine.counts' "queues"; its sum is
  ``todo_total``): stats.json, the pages, /metrics, the backlog samples and the maintainer's
  upkeep. It counts the first DOWNLOADER_QUEUES_COUNTED downloaders' own queues, so a page
  never reads a huge set, and the queued items offloaded (not the done ones: not to do);
- the full census of `tracker status` (``project_status``): every downloader's queue, dead
  items, segments by the queue they came from;
- the segment listing (``segment_table``).

RUN(commands) -> replies is a pipeline of either connection (tracker_core.infra.connection: text is
str): a pipelined HGETALL is a flat list from RawRedis and a dict from redis-py, which _hash
reads alike.
"""

from __future__ import annotations

from tracker_core import keyspace

# The segment registry's vocabulary, from the one module that defines it (it loads only keys,
# not the filesystem side of offload).
from tracker_core.offload.segment_registry import DONE, QUEUES, STAGED_FIELD
from tracker_core.scripts.derived_counters import with_derived

DOWNLOADER_QUEUES_COUNTED = 1000
SOURCES = (*QUEUES, DONE)  # where a segment's items came from


def _hash(reply) -> dict[str, str]:
    """A HGETALL reply as {field: value}: RawRedis gives a flat list, redis-py a dict."""
    if isinstance(reply, dict):
        return dict(reply)
    if isinstance(reply, (list, tuple)):
        return dict(zip(reply[::2], reply[1::2]))
    return {}  # an error reply (a key of another type): count nothing from it


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def redis_py_runner(conn):
    """RUN for a redis-py client: one pipeline (no transaction) per call."""

    def run(commands: list[tuple]) -> list:
        pipe = conn.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)

    return run


# -- offloaded items: the segment registry ------------------------------------------------------


def segment_table(segments: dict[str, str], sources: dict[str, str]) -> dict[int, dict]:
    """Registered segments: number -> {"items", "source"} (the queue, or done, they came from).

    SEGMENTS is the segments hash (number -> items; '#' fields are bookkeeping), SOURCES the
    segment_queues hash (number -> source, todo when missing).
    """
    return {
        int(number): {"items": _int(n), "source": sources.get(number, "todo")}
        for number, n in sorted(segments.items(), key=lambda pair: _int(pair[0]))
        if not number.startswith("#")
    }


def staged_source(sources: dict[str, str]) -> str:
    """The source of the set in `offloading` ('#staged' is "NUMBER SOURCE"; todo when unknown)."""
    return sources.get(STAGED_FIELD, "0 todo").partition(" ")[2] or "todo"


def offloaded_by_source(
    segments: dict[str, str], sources: dict[str, str], staged_items: int
) -> dict[str, int]:
    """Offloaded items per source (each shared queue and done): in segments, or staged."""
    by_source = dict.fromkeys(SOURCES, 0)
    for segment in segment_table(segments, sources).values():
        by_source[segment["source"]] = by_source.get(segment["source"], 0) + segment["items"]
    staged = staged_source(sources)
    by_source[staged] = by_source.get(staged, 0) + staged_items
    return by_source


def offloaded_queued(segments: dict[str, str], sources: dict[str, str], staged_items: int) -> int:
    """Queued items offloaded (segments of a queue, and the staged set unless it is done's)."""
    by_source = offloaded_by_source(segments, sources, staged_items)
    return sum(n for source, n in by_source.items() if source != DONE)


# -- the to-do breakdown -------------------------------------------------------------------------


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


def todo_total(counts: dict) -> int:
    """Items still to do, offloaded queue tails included: the sum of Engine.counts' "queues"
    (stats.json's todo_total, /metrics' tracker_todo_items, the pages, the backlog)."""
    return sum(counts["queues"].values())


# -- the full census (`tracker status`) ----------------------------------------------------------


def project_status(run, k: keyspace.ProjectKeys) -> dict:
    """Where every item of K's project is, every downloader's own queue counted (JSON-ready).

    "todo_total" here is what waits in Redis (queues, downloaders' queues, held); the queued
    items offloaded are "offloaded" (per source in "offloaded_queues"), done ones offloaded
    "done_offloaded".
    """
    replies = run(
        [
            *commands(k),
            ("ZCARD", k.out),
            ("SCARD", k.done),
            ("HGETALL", k.stats),
            ("HLEN", k.dead),
            ("SMEMBERS", k.downloader_queues),
        ]
    )
    (todo, backfeed, secondary, redo, limited, limited_in, segments, sources, staged_items) = replies[
        : N_COMMANDS - 1
    ]
    out, done_kept, stats, dead, every_owner = replies[N_COMMANDS:]
    every_owner = sorted(every_owner or ())
    own = run([("SCARD", k.downloader_queue(o)) for o in every_owner]) if every_owner else []
    shared = dict(zip(keyspace.SHARED_QUEUES, (_int(todo), _int(backfeed), _int(secondary), _int(redo))))
    per_downloader = {o: _int(n) for o, n in zip(every_owner, own) if _int(n)}
    held = _int(limited) + _int(limited_in)
    segments, sources = _hash(segments), _hash(sources)
    by_source = offloaded_by_source(segments, sources, _int(staged_items))
    done_offloaded = by_source.pop(DONE)
    counters = with_derived({f: _int(v) for f, v in _hash(stats).items()}, totals=True)
    return {
        "project": k.project,
        # "limited": items held back by a pattern limit (in its sub-queue or on their way in).
        "queues": {**shared, "downloader": per_downloader, "limited": held},
        "todo_total": sum(shared.values()) + sum(per_downloader.values()) + held,
        "out": _int(out),
        "dead": _int(dead),
        "offloaded": sum(by_source.values()),
        "offloaded_queues": by_source,
        "segments": len(segment_table(segments, sources)),
        "done": counters.get("items_done", 0),
        "done_kept": _int(done_kept),
        "done_offloaded": done_offloaded,
        "counters": counters,
    }


def segment_listing(run, k: keyspace.ProjectKeys) -> dict:
    """Registered segments ("N" -> {"items", "source"}) and the items staged on their way to one."""
    segments, sources, staged_items = run(
        [("HGETALL", k.segments), ("HGETALL", k.segment_queues), ("SCARD", k.offloading)]
    )
    table = segment_table(_hash(segments), _hash(sources))
    return {"segments": {str(n): row for n, row in table.items()}, "offloading": _int(staged_items)}
