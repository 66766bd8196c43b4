"""The request hot path: claim, done, release, upload and item status, one script per call.

An ``Engine`` belongs to one process (one bjoern worker) and holds one raw hiredis connection and
a cache of project settings. Each public method makes one Redis round trip in the common case.
"""

from __future__ import annotations

import os
import random
import time

from tracker_core import keyspace, scripts
from tracker_core.figures import census
from tracker_core.infra import redis_clock, topology
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import giveback, shard_router
from tracker_core.items.item_status import Owners
from tracker_core.items.uniques_seen import UniquesSeen
from tracker_core.project import pattern_limits
from tracker_core.project.settings_schema import ProjectSettings
from tracker_core.project.shard_layout import GENERATIONS_FIELD, SHARD_TAGS_FIELD, ShardLayout, summed
from tracker_core.scripts.derived_counters import with_derived
from tracker_core.scripts.requests import DoneReply

_NEGATIVE_CACHE_S = 1.0
_SETTINGS_CACHE_S = 1.0
MEMORY_GUARD_ENV = "TRACKER_MEMORY_GUARD_PERCENT"
MEMORY_GUARD_DEFAULT = 90


def memory_guard_percent(value=None) -> int:
    """Share of Redis's maxmemory past which backfeed is refused: VALUE clamped to 1..100.

    Without VALUE (a caller that passed none, such as a test or a script building an Engine
    by hand) the fallback is TRACKER_MEMORY_GUARD_PERCENT, then MEMORY_GUARD_DEFAULT; the web
    app passes its config's value, so the environment is read here only as that fallback.
    """
    if value is None:
        value = os.environ.get(MEMORY_GUARD_ENV, MEMORY_GUARD_DEFAULT)
    try:
        return min(100, max(1, int(value)))
    except ValueError:
        return MEMORY_GUARD_DEFAULT


_memory_guard_percent = memory_guard_percent  # the Engine's keyword shadows the name


def _pairs_to_dict(flat) -> dict:
    return dict(zip(flat[::2], flat[1::2]))


class Engine:
    def __init__(self, redis_url: str, clock=None, memory_guard_percent: int | None = None):
        """CLOCK: seconds now, Redis's by default (tracker_core.infra.redis_clock); tests pass a settable one."""
        self.redis_url = redis_url
        # None: TRACKER_MEMORY_GUARD_PERCENT or 90 (see memory_guard_percent); read once here.
        self.memory_guard_percent = _memory_guard_percent(memory_guard_percent)
        self.conn = topology.connect(redis_url)
        self.clock = redis_clock.ConnectionClock(self.conn) if clock is None else clock
        self._keys: dict[str, keyspace.ProjectKeys] = {}
        # project -> (settings, monotonic time until which they may be used without a reload)
        self._settings: dict[str, tuple[ProjectSettings, float]] = {}
        self._unknown: dict[str, float] = {}
        self._limits: dict[str, tuple[int, pattern_limits.CompiledLimits]] = {}
        self._memory_checked_at = float("-inf")
        self._memory_full = False
        self._owners = Owners()  # downloaders with own queues, for item_status
        self._uniques = UniquesSeen()  # what this process's claims counted in the daily uniques
        self._layouts: dict[str, tuple[tuple, ShardLayout]] = {}  # project -> (layout fields, layout)
        self._rotation = shard_router.Rotation()
        # claim and done sent as ready RESP bytes (tracker_core.scripts.packed): RawRedis only.
        # They go through RawRedis.execute_packed, not execute_command: a wrapper that counts
        # or traces commands wraps both.
        packed = type(self.conn) is RawRedis
        self._claims = scripts.packed_claim(packed)
        self._dones = scripts.packed_done(packed)

    # -- settings cache -------------------------------------------------------------------------

    def keys(self, project: str) -> keyspace.ProjectKeys:
        k = self._keys.get(project)
        if k is None:
            k = self._keys[project] = keyspace.ProjectKeys(project)
        return k

    def layout(self, project: str) -> ShardLayout:
        """PROJECT's shards (tracker_core.project.shard_layout), from its cached settings; one shard for
        a project that does not exist (its scripts then answer so)."""
        settings = self.settings(project)
        values = settings.values if settings is not None else {}
        tags = (values.get(SHARD_TAGS_FIELD, ""), values.get(GENERATIONS_FIELD, ""))
        cached = self._layouts.get(project)
        if cached is None or cached[0] != tags:
            if len(self._layouts) > 10000:
                self._layouts.clear()
            layout = ShardLayout.from_settings(project, values)
            if not layout.sharded:  # the engine's cached keys, as one-shard calls use them
                layout = ShardLayout(project, (self.keys(project).tag,))
            cached = self._layouts[project] = (tags, layout)
        return cached[1]

    def settings(self, project: str) -> ProjectSettings | None:
        """Cached settings of PROJECT, loaded on first use; None for a project that doesn't exist."""
        cached = self._settings.get(project)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        if self._unknown.get(project, 0) > time.monotonic():
            return None
        k = keyspace.ProjectKeys(project)
        values = self.conn.hgetall(k.settings)
        if not values:
            # Remember briefly that it doesn't exist, so a flood of requests for a wrong project
            # costs no Redis round trip each; a newly created project is seen within a second.
            if len(self._unknown) > 10000:
                self._unknown.clear()
            self._unknown[project] = time.monotonic() + _NEGATIVE_CACHE_S
            return None
        settings = ProjectSettings.from_redis(values)
        self._keys.setdefault(project, k)
        # Script replies carry the settings age and drop a stale entry at once, but a request
        # refused in Python (455 for an old client) reaches no script: without an expiry a
        # worker that cached a high minimum version would refuse every client forever.
        self._settings[project] = (settings, time.monotonic() + _SETTINGS_CACHE_S)
        return settings

    def limits(self, project: str) -> pattern_limits.CompiledLimits | None:
        """PROJECT's limits with their compiled classifier, reloaded when the settings age moves."""
        settings = self.settings(project)
        if settings is None:
            return None
        cached = self._limits.get(project)
        if cached is None or cached[0] != settings.age:
            values = self.conn.hgetall(self.keys(project).limits)
            compiled = pattern_limits.CompiledLimits(pattern_limits.from_hash(values))
            cached = self._limits[project] = (settings.age, compiled)
        return cached[1]

    def _note_age(self, project: str, age) -> None:
        cached = self._settings.get(project)
        if cached is not None and cached[0].age != int(age):
            del self._settings[project]

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- the warrior protocol -------------------------------------------------------------------

    def claim(self, project: str, downloader: str, ip: str, wanted: int) -> tuple[int, list[str]]:
        """Claim up to WANTED items; return (status, names), status a scripts.claim.codes."""
        now_ms = self._now_ms()
        layout = self.layout(project)
        # The cached settings say which life of the project the remembered uniques belong to;
        # the script checks it against the stored one, so a stale cache only costs the PFADDs.
        cached = self._settings.get(project)
        created_ms = cached[0].values.get("created_ms", "") if cached is not None else ""
        downloader_counted, ip_counted = self._uniques.flags(project, created_ms, now_ms, downloader, ip)
        if layout.sharded:
            code, age, items = self._claim_shards(
                layout, now_ms, downloader, ip, wanted, created_ms, downloader_counted, ip_counted
            )
        else:
            code, age, items = self._claims.run(
                self.conn,
                layout.keys[0],
                now_ms,
                downloader,
                ip,
                wanted,
                created_ms,
                downloader_counted,
                ip_counted,
            )
        if cached is not None and age is not None and cached[0].age != age:  # _note_age, with the entry above
            del self._settings[project]
        if not (downloader_counted and ip_counted):
            self._uniques.record(project, created_ms, now_ms, downloader, ip, code)
        return code, items

    def _claim_shards(self, layout, now_ms, downloader, ip, wanted, created_ms, d_counted, ip_counted):
        """A claim over several shards (tracker_core.items.shard_router). The daily uniques of a sharded
        project are counted each on the shard its name picks (the statistics add the shards'
        counts): the shards' scripts are told the client is counted, and a client not yet
        counted by this process is added here, once the claim ran."""

        def visit(keys, room, mode):
            return self._claims.run(
                self.conn, keys, now_ms, downloader, ip, room, created_ms, True, True, mode
            )

        project = layout.project
        now = now_ms / 1000
        order = self._rotation.order(project, layout.count, now)
        code, items, age = shard_router.claim(
            layout,
            order,
            wanted,
            visit,
            lambda index, code: self._rotation.answered(project, index, code, now),
        )
        if not (d_counted and ip_counted) and code in shard_router.COUNTED and created_ms:
            shard_router.count_uniques(self.conn, layout, now_ms, downloader, ip)
        return code, age, items

    def bury_unservable(self, project: str, downloader: str, reasons: dict[str, str]) -> int:
        """Send the claims DOWNLOADER was just given but cannot receive to `dead`; how many.

        REASONS maps each such name to why (not UTF-8, holds NUL). Called only when building
        the answer found one, so the request path pays nothing otherwise.
        """
        # Back to the bytes Redis holds: the names came decoded with surrogateescape.
        layout = self.layout(project)
        buried = 0
        for index, names in shard_router.locate(self.conn, layout, reasons).items():
            flat = [x for name in names for x in (scripts.wire(name), reasons[name])]
            reply = scripts.bury_unservable(
                self.conn, layout.keys[index], now_ms=self._now_ms(), downloader=downloader, reasons=flat
            )
            buried += reply.buried
        return buried

    def done(
        self,
        project: str,
        downloader: str,
        version: str,
        items: list[str],
        domain_bytes: list,
        item_id: str,
        ip: str = "",
    ) -> DoneReply | None:
        """Mark ITEMS done (idempotent), by the rules of done-20.lua; None for an unknown project.

        IP (the sender's) goes into the done log with the rest of the call. The reply's refused
        counts names waiting in a queue (nothing changed: accept_queued_dones off); clamped is 1
        when the bytes were cut to max_bytes_per_item per item.
        """
        now_ms = self._now_ms()
        layout = self.layout(project)

        def call(keys, names, shared_bytes):
            return self._dones.run(
                self.conn, keys, now_ms, downloader, version, item_id, ip, shared_bytes, names
            )

        if layout.sharded:
            groups = shard_router.locate(self.conn, layout, items)
            reply, age = shard_router.done(layout, items, domain_bytes, call, groups)
        else:
            reply = call(layout.keys[0], items, domain_bytes)
            age = reply.settings_age
        if reply.code == scripts.done.codes.UNKNOWN_PROJECT:
            return None
        if age is not None:
            self._note_age(project, age)
        return reply

    def release(self, project: str, downloader: str, items: list[str]) -> int | None:
        """Give back claims DOWNLOADER holds ('' = whoever holds them); the number released.

        Released items go back to todo, or are held in their limit's sub-queue when one of the
        project's limits matches them, through the one give-back path (tracker_core.items.giveback)
        classifying with the cached compiled limits; the script refuses if the settings age
        moved since, and the call is made again with the age it answered.
        Anyone may send any names, so only the names that are out (held by DOWNLOADER) are
        classified: one read-only HMGET picks them, and the script re-checks every claim
        atomically. A name that was not out at the read is left alone like any unclaimed name.
        """
        layout = self.layout(project)
        if layout.sharded:
            released = [
                self._release_on(project, layout.keys[i], downloader, names)
                for i, names in shard_router.locate(self.conn, layout, items).items()
            ]
            return None if self.settings(project) is None else sum(r or 0 for r in released)
        return self._release_on(project, layout.keys[0], downloader, items)

    def _release_on(
        self, project: str, k: keyspace.ProjectKeys, downloader: str, items: list[str]
    ) -> int | None:
        """Engine.release on one shard (keys K)."""
        items = self._claimed_by(k, downloader, items)
        if not items:
            return None if self.settings(project) is None else 0

        def classify():
            settings = self.settings(project)
            # No cached settings (a project created a moment ago): "?" never matches, so the
            # script answers with the age.
            return ("?" if settings is None else str(settings.age)), self.limits(project)

        def forget(reply):
            self._unknown.pop(project, None)
            self._note_age(project, reply.settings_age)

        reply = giveback.release(
            self.conn, k, downloader, items, now_ms=self._now_ms(), classify=classify, on_stale=forget
        )
        return None if reply.code == scripts.release.codes.UNKNOWN_PROJECT else reply.released

    def _claimed_by(self, k: keyspace.ProjectKeys, downloader: str, items: list[str]) -> list[str]:
        """The ITEMS that are out, held by DOWNLOADER ('' = by anyone), in order."""
        claims = self.conn.execute_command("HMGET", k.claims, *items) if items else []
        return [
            item
            for item, claim in zip(items, claims)
            if claim is not None and (not downloader or claim.partition("\t")[0] == downloader)
        ]

    def uploaded(self, project: str, uploader: str, item: str, server: str) -> bool:
        reply = scripts.uploaded(
            self.conn, self.keys(project), now_ms=self._now_ms(), uploader=uploader, item=item, server=server
        )
        return reply.code != scripts.uploaded.codes.UNKNOWN_PROJECT

    def item_status(self, project: str, item: str) -> tuple[str | None, str | None]:
        """(status, downloader) of ITEM, the old tracker's two answer keys (see item_place)."""
        place = self.item_place(project, item)
        return (None, None) if place is None else (place["status"], place["downloader"])

    def item_place(self, project: str, item: str) -> dict | None:
        """Where ITEM is: every place an item can be (tracker_core.items.item_status); None for an
        unknown project. One script call; the name is never classified (anyone may ask about
        any name): its held entry is looked up under each limit, a bounded number of lookups.
        """
        return shard_router.lookup(self.conn, self.layout(project), item, self._owners)[1]

    def upload_target(self, project: str, downloader: str) -> str | None:
        """One of the project's active targets at random, ':downloader' filled in; None if none.

        Read fresh each time: uploads are once per item, and no script reply on this path would
        tell the settings cache that targets changed.
        """
        targets = self.conn.hgetall(self.keys(project).upload_targets)
        active = [t for t, state in targets.items() if state == "active"]
        if not active:
            return None
        return random.choice(active).replace(":downloader", downloader)

    def memory_nearly_full(self) -> bool:
        """Whether Redis uses at least memory_guard_percent of its maxmemory (read at most once a
        second per process; False when no maxmemory is set or INFO cannot be read).

        What anonymous clients can add (backfeed) is refused before Redis is full: under
        noeviction a full Redis refuses every write of every project, claims and dones included.
        A soft bound: a post already admitted may pass it by what one post holds.
        """
        now = time.monotonic()
        if now < self._memory_checked_at + 1.0:
            return self._memory_full
        self._memory_checked_at = now
        try:
            info = self.conn.execute_command("INFO", "memory")
            fields = dict(line.split(":", 1) for line in str(info).splitlines() if ":" in line)
            limit = int(fields.get("maxmemory", 0))
            self._memory_full = (
                limit > 0 and int(fields["used_memory"]) * 100 >= limit * self.memory_guard_percent
            )
        except Exception:  # a topology without INFO here (a cluster): no guard, never a 500
            self._memory_full = False
        return self._memory_full

    def count(self, project: str | None, field: str) -> None:
        """Count a refused request (bad input, old version) in the project's or the global stats."""
        key = self.keys(project).stats if project else keyspace.GLOBAL_STATS
        self.conn.execute_command("HINCRBY", key, field, 1)

    # -- read-only views for the API ------------------------------------------------------------

    def counts(self, project: str) -> dict:
        """Queue sizes and counters of PROJECT (for stats.json, /metrics and the pages).

        "queues" is the to-do breakdown of tracker_core.figures.census (offloaded queue tails included),
        so its sum is the to-do total everywhere (census.todo_total).
        """

        parts = [self._counts_on(k) for k in self.layout(project).keys]
        if len(parts) == 1:
            return parts[0]
        return summed(parts)

    def _counts_on(self, k: keyspace.ProjectKeys) -> dict:
        replies = self.conn.pipeline(
            (
                *census.commands(k),
                ("ZCARD", k.out),
                ("SCARD", k.done),
                ("HGETALL", k.stats),
                ("HGETALL", k.domain_bytes),
            )
        )
        owners = census.owners(replies)
        own = self.conn.pipeline([("SCARD", k.downloader_queue(o)) for o in owners]) if owners else []
        out, done_kept, stats, domain_bytes = replies[census.N_COMMANDS :]
        stats = with_derived({f: int(v) for f, v in _pairs_to_dict(stats).items()}, totals=True)
        return {
            "queues": census.sizes(replies, own),
            "out": out,
            "done": stats.get("items_done", 0),
            "done_kept": done_kept,
            "domain_bytes": {d: int(b) for d, b in _pairs_to_dict(domain_bytes).items()},
            "counters": stats,
        }

    def leaderboard(self, project: str, top: int) -> list[dict]:
        layout = self.layout(project)
        if not layout.sharded:
            return self._leaderboard_on(layout.keys[0], top)
        # Each shard credits a downloader for the items of its own shard: the whole score is the
        # sum, so every shard's whole board is read (one entry per downloader; bounded by them).
        merged: dict[str, dict] = {}
        for k in layout.keys:
            for row in self._leaderboard_on(k, -1):
                into = merged.setdefault(row["downloader"], {**row, "bytes": 0, "items": 0})
                into["bytes"] += row["bytes"]
                into["items"] += row["items"]
                into["version"] = into["version"] or row["version"]
        rows = sorted(merged.values(), key=lambda row: (-row["bytes"], row["downloader"]))
        return rows[:top]

    def _leaderboard_on(self, k: keyspace.ProjectKeys, top: int) -> list[dict]:
        flat = self.conn.execute_command(
            "ZREVRANGE", k.downloader_bytes, 0, top - 1 if top > 0 else -1, "WITHSCORES"
        )
        names = flat[::2]
        if not names:
            return []
        counts, versions = self.conn.pipeline(
            (("HMGET", k.downloader_count, *names), ("HMGET", k.downloader_version, *names))
        )
        return [
            {"downloader": n, "bytes": int(float(b)), "items": int(c or 0), "version": v}
            for n, b, c, v in zip(names, flat[1::2], counts, versions)
        ]
