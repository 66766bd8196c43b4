"""Keep a project's chart data bounded: sample the backlog, roll hours up, record the top downloaders.

`tracker maintain` runs ``upkeep`` for every project once a minute, so minute counters are rolled
into hours before they expire even when nobody looks; a snapshot (stats.py) runs the same steps
on the shards it reads. Owns the minute and hour counter hashes' lifecycle (their units, the
roll-up's delay and look-back, the hours' lifetime) and the reading of one as counts.
"""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.figures import census, stats_ranges
from tracker_core.figures.stats_top import TOP_HISTORY_N, TOP_HISTORY_TIERS
from tracker_core.project.shard_layout import SHARD_TAGS_FIELD, ShardLayout
from tracker_core.scripts.constants import MINUTE_TTL_S
from tracker_core.scripts.derived_counters import with_derived

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
HOUR_TTL_S = 60 * 86_400
ROLLUP_DELAY_MIN = 3  # roll an hour up only once writers on a slow clock are past it
ROLLUP_LOOKBACK_H = 46  # minute hashes live 48 h: older hours can no longer be summed


def to_int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def counts_of(flat) -> dict[str, int]:
    """A minute's or an hour's counter hash (HGETALL's flat reply), "requests" derived."""
    return with_derived({f: to_int(v) for f, v in zip(flat[::2], flat[1::2])})


def record_top_history(conn, project: str, now_ms: int, k: keyspace.ProjectKeys | None = None) -> int:
    """Add the top downloaders' item counts to each history stream whose point is due.

    One script reads the TOP_HISTORY_N downloaders with the most bytes (ZREVRANGE 0 N-1 and one
    HMGET of those names, never the whole hash or zset) and appends a point to every stream
    whose newest point lies in an earlier interval, so any number of writers add one point per
    interval. K: the keys of one shard of PROJECT (its first by default). Returns how many
    streams got a point.
    """
    k = keyspace.ProjectKeys(project) if k is None else k
    return scripts.top_history(conn, k, now_ms=now_ms, top=TOP_HISTORY_N, tiers=TOP_HISTORY_TIERS)


def layout_of(conn, project: str) -> ShardLayout:
    """PROJECT's shards as its first shard's settings record them (one HGET)."""
    tags = conn.execute_command("HGET", keyspace.ProjectKeys(project).settings, SHARD_TAGS_FIELD)
    return ShardLayout.from_settings(project, {SHARD_TAGS_FIELD: tags or ""})


def upkeep(conn, project: str, now_ms: int, layout: ShardLayout | None = None) -> None:
    """Sample PROJECT's backlog and roll completed hours up, as a snapshot does, with no viewer.

    `tracker maintain` calls this for every project once a minute, so minute counters are rolled
    into hours before they expire (two days) even when nobody looks at the pages. CONN is any
    client with ``execute_command`` (redis-py or RawRedis); the scripts are idempotent (an hour
    already rolled up costs one EXISTS, a top-downloaders point already taken two XREVRANGE).
    LAYOUT: PROJECT's shards (read when not given); every shard rolls its own counters up, and
    the whole project's backlog is sampled on the first (tracker_core.figures.stats_shards).
    """
    layout = layout_of(conn, project) if layout is None else layout
    backlog = sum(backlog_items(conn, k) for k in layout.keys)
    for index, k in enumerate(layout.keys):
        sample_and_roll_up(conn, k, now_ms, backlog if index == 0 else None)
        stats_ranges.roll_up_days(conn, k, now_ms)  # after the hours: a day waits for its last hour
        record_top_history(conn, project, now_ms, k)


def backlog_items(conn, k: keyspace.ProjectKeys) -> int:
    """Items to do (census.read: offloaded ones included) and out: what a snapshot samples.

    CONN is redis-py or RawRedis: the commands go one by one through ``execute_command``
    (once a minute per project; the snapshot pipelines the same breakdown with its counts).
    """
    queues = census.read(lambda commands: [conn.execute_command(*c) for c in commands], k)
    return sum(queues.values()) + int(conn.execute_command("ZCARD", k.out))


def sample_and_roll_up(
    conn, k: keyspace.ProjectKeys, now_ms: int, backlog: int | None, hours: dict | None = None
) -> None:
    """Sample the backlog for this minute and roll completed hours up (both scripts idempotent).

    HOURS, when given, holds the hour hashes already read: hours found there are skipped, and
    hours rolled up now are added to it. BACKLOG None (a sharded project's further shards):
    no sample.
    """
    if backlog is not None:
        scripts.sample_backlog(conn, k, minute=now_ms // MINUTE_MS, backlog=backlog, ttl_s=MINUTE_TTL_S)
    newest = (now_ms - ROLLUP_DELAY_MIN * MINUTE_MS) // HOUR_MS - 1
    for hour in range(newest - ROLLUP_LOOKBACK_H + 1, newest + 1):
        if hours is not None and hours.get(hour, {}) != {}:
            continue
        written = (
            scripts.rollup_hour(conn, k, hour=hour, ttl_s=HOUR_TTL_S) == scripts.rollup_hour.codes.WRITTEN
        )
        if written and hours is not None:
            hours[hour] = counts_of(conn.execute_command("HGETALL", k.hour(hour)))
