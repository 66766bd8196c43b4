"""The event detector: what `tracker maintain` checks every --webhook-interval-s (0.5 s by
default) on a thread of its own, beside its passes.

A check reads every project a hook watches (every project once a hook without a project gets
project events): its queues, out, the done counter, paused, the segments waiting, summed over
its shards. It also reads this node's clock offset and the primaries serving Redis, turns them
into events with the rules of events.py, and writes the new state with the events' deliveries
in one notify_emit call that applies only if nobody wrote that state since it was read: with a
maintainer on every node, each event is queued once (the others read the new state next time).
Only the detector holding a short lease (LEASE_MS, through maintain_lease-1.lua on its own key)
reads the projects and the primaries; every node checks its own clock.
"""

from __future__ import annotations

import json
import socket

from tracker_core import keyspace, scripts
from tracker_core.figures import census
from tracker_core.infra.redis_clock import RedisClock
from tracker_core.notify import events, hooks, outbox
from tracker_core.offload.lease import default_holder
from tracker_core.offload.segment_registry import QUEUES
from tracker_core.project import settings_schema
from tracker_core.project.shard_layout import SHARD_TAGS_FIELD, ShardLayout
from tracker_core.scripts.derived_counters import with_derived

PROJECT_FIELD = "project:"
NODE_FIELD = "node:"
REDIS_FIELD = "redis:primaries"
LEASE_MS = 5_000  # a detector that stops renewing it is replaced within this


class _LeaseKeys:
    """What the maintain_lease binding reads of a project's keys, for the detector's lease."""

    maintain_lease = keyspace.NOTIFY_LEASE


_FIRST = ("paused", SHARD_TAGS_FIELD)


def primaries(client) -> list[str]:
    """The primaries serving CLIENT: a Cluster's (its slot map), a Sentinel's (as the sentinels
    name it), or the one Redis's address."""
    if hasattr(client, "get_primaries"):
        return sorted(f"{n.host}:{n.port}" for n in client.get_primaries())
    pool = client.connection_pool
    if hasattr(pool, "get_master_address"):
        host, port = pool.get_master_address()
        return [f"{host}:{port}"]
    kw = pool.connection_kwargs
    return [kw.get("path") or f"{kw.get('host')}:{kw.get('port')}"]


def read_project(client, project: str) -> events.ProjectSeen | None:
    """PROJECT as it is now, every shard summed; None when it was deleted meanwhile."""
    paused, tags = client.hmget(keyspace.ProjectKeys(project).settings, *_FIRST)
    if paused is None and tags is None and not client.exists(keyspace.ProjectKeys(project).settings):
        return None
    layout = ShardLayout.from_settings(project, {SHARD_TAGS_FIELD: tags})
    run = census.redis_py_runner(client)
    queued = out = done = 0
    stalled: set[str] = set()
    stuck: set[str] = set()
    for k in layout.keys:
        replies = run([*census.commands(k), ("ZCARD", k.out), ("HGETALL", k.stats),
                       ("HMGET", k.settings, *settings_schema.OFFLOAD_FIELDS)])  # fmt: skip
        owners = census.owners(replies)
        sizes = census.sizes(
            replies, run([("SCARD", k.downloader_queue(o)) for o in owners]) if owners else []
        )
        queued += sum(sizes.values())
        out += int(replies[census.N_COMMANDS] or 0)
        done += with_derived(
            {f: int(v) for f, v in replies[census.N_COMMANDS + 1].items() if v.isdigit()}
        ).get("items_done", 0)
        rules = settings_schema.offload_rules(dict(zip(settings_schema.OFFLOAD_FIELDS, replies[-1])))
        # census.commands' 7th to 9th: the segments, their sources and the staged set's size.
        segments, sources, staged = replies[6] or {}, replies[7] or {}, int(replies[8] or 0)
        waiting = census.offloaded_by_source(segments, sources, 0)  # the staged set waits for no refill
        for queue in QUEUES:
            if sizes[queue] == 0 and waiting[queue] > 0:
                stalled.add(queue)
            if rules.high > 0 and sizes[queue] > rules.high + rules.per_segment:
                stuck.add(queue)
        if staged > 0:
            stuck.add("offloading")
    return events.ProjectSeen(
        queued=queued,
        out=out,
        done=done,
        paused=paused == "1",
        stalled=tuple(sorted(stalled)),
        stuck=tuple(sorted(stuck)),
    )


class Detector:
    """One maintainer's detector. CLOCK: the RedisClock whose offset is this node's (its own,
    by default: the process's clock is not shared across threads); NODE: this node's name in
    clock.off events (its host name)."""

    def __init__(
        self,
        client,
        thresholds: events.Thresholds = events.Thresholds(),
        clock: RedisClock | None = None,
        node: str | None = None,
        max_queued: int = outbox.MAX_QUEUED,
        holder: str | None = None,
        lease_ms: int = LEASE_MS,
    ):
        self.client = client
        self.thresholds = thresholds
        self.clock = clock or RedisClock(max_offset_s=0)
        self.node = node or socket.gethostname()
        self.max_queued = max_queued
        self.holder = holder or default_holder()
        self.lease_ms = lease_ms

    def leads(self) -> bool:
        """Take or renew the detectors' lease: whether this one reads the projects now."""
        reply = scripts.maintain_lease(self.client, _LeaseKeys, holder=self.holder, lease_ms=self.lease_ms)
        return reply == scripts.maintain_lease.codes.HELD

    def release(self) -> None:
        scripts.maintain_lease(
            self.client, _LeaseKeys, holder=self.holder, lease_ms=self.lease_ms, release=True
        )

    def check(self) -> list[dict]:
        """Check once; the events queued (empty when another maintainer wrote first: the next
        check reads what it wrote; and while no hook exists, when nothing is read)."""
        every_hook = hooks.every_hook(self.client)
        if not every_hook:  # nobody listens: no reads (what changes meanwhile fires once one does)
            return []
        now_ms = int(self.clock.now(self.client, checked=False) * 1000)
        stored = self.client.hgetall(keyspace.NOTIFY_STATE)
        changes: dict[str, list] = {}
        found: list[dict] = []

        def note(field: str, state: dict, fired: events.Events, project: str | None = None) -> None:
            text = json.dumps(state, sort_keys=True)
            if text != stored.get(field):
                changes[field] = [stored.get(field, False), text]
            found.extend(outbox.new_event(name, project, data, now_ms) for name, data in fired)

        if self.leads():
            projects = sorted(self.client.smembers(keyspace.PROJECTS))
            watched = watched_projects(every_hook)
            for project in projects if watched is None else [p for p in projects if p in watched]:
                seen = read_project(self.client, project)
                if seen is not None:
                    field = PROJECT_FIELD + project
                    old = _loads(stored.get(field))
                    note(field, *events.project(old, seen, now_ms, self.thresholds), project)
            for field in stored:
                if field.startswith(PROJECT_FIELD) and field[len(PROJECT_FIELD) :] not in projects:
                    changes[field] = [stored[field], False]  # a deleted project's
            note(REDIS_FIELD, *events.failover(_loads(stored.get(REDIS_FIELD)), primaries(self.client)))
        field = NODE_FIELD + self.node
        note(field, *events.clock(_loads(stored.get(field)), self.clock.offset_s, self.node, self.thresholds))
        if not changes:
            return []
        rows = outbox.deliveries(found, every_hook, now_ms)
        reply = scripts.notify_emit(
            self.client,
            now_ms=now_ms,
            max_queued=self.max_queued,
            changes=json.dumps(changes),
            deliveries=rows,
        )
        return found if reply != scripts.notify_emit.codes.CHANGED else []


def watched_projects(every_hook: list) -> set[str] | None:
    """The projects some hook gets a project's event of; None when a hook without a project
    does (every project is read then). A project no hook watches costs no read: its state stays
    as last read, and a change meanwhile fires once a hook watches it."""
    watched: set[str] = set()
    for hook in every_hook:
        if set(hook.events) - hooks.GLOBAL_EVENTS:
            if hook.project is None:
                return None
            watched.add(hook.project)
    return watched


def _loads(text: str | None) -> dict | None:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
