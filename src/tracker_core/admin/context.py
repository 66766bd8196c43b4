"""Who acts, on which Redis: what every admin verb takes first.

A verb reads and writes through ``ctx.conn`` (redis-py, str replies decoded with
surrogateescape, so a name that is not UTF-8 round-trips), checks a project with ``ctx.keys``
and records its change once with ``ctx.audit`` under ``ctx.actor`` (a token id, or "cli").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import redis

from tracker_core import keyspace
from tracker_core.access import audit
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.infra import topology
from tracker_core.project.shard_layout import GENERATIONS_FIELD, SHARD_TAGS_FIELD, ShardLayout


def connect(url: str) -> redis.Redis:
    """A redis-py client for URL: single Redis, Sentinel primary or Cluster (see topology)."""
    return topology.admin_client(url, decode_responses=True, encoding_errors="surrogateescape")


@dataclass(frozen=True)
class AdminContext:
    conn: redis.Redis
    # What the audit log records as the author of a change: "cli", or the token id of an admin
    # API or page request (see as_actor).
    actor: str = audit.CLI_ACTOR

    @classmethod
    def from_url(cls, url: str, actor: str = audit.CLI_ACTOR) -> AdminContext:
        return cls(connect(url), actor)

    def as_actor(self, actor: str) -> AdminContext:
        """The same connection, acting as ACTOR (one context per request in the web faces)."""
        return replace(self, actor=actor)

    def keys(self, project: str, must_exist: bool = True) -> keyspace.ProjectKeys:
        """PROJECT's keys; BadInput for a malformed name, NotFound (with MUST_EXIST) for a
        project that has no settings."""
        if type(project) is not str or not keyspace.valid_project_name(project):
            raise BadInput(f"bad project name {str(project)[:80]!r}: use a-z, 0-9, - and _ (at most 64)")
        k = keyspace.ProjectKeys(project)
        if must_exist and not self.conn.exists(k.settings):
            raise NotFound(f"unknown project {project!r}")
        return k

    def layout(self, project: str, must_exist: bool = True) -> ShardLayout:
        """PROJECT's shards (docs/sharding.md), as its first shard's settings record them."""
        k = self.keys(project, must_exist)
        tags, generations = self.conn.hmget(k.settings, SHARD_TAGS_FIELD, GENERATIONS_FIELD)
        return ShardLayout.from_settings(project, {SHARD_TAGS_FIELD: tags, GENERATIONS_FIELD: generations})

    def shards(self, project: str, must_exist: bool = True) -> tuple[keyspace.ProjectKeys, ...]:
        """The keys of every shard of PROJECT, the first shard LAST: a change written to every
        shard in this order is visible on the first (whose settings age the nodes follow) only
        once the others hold it."""
        keys = self.layout(project, must_exist).keys
        return keys[1:] + keys[:1]

    def audit(self, action: str, project: str | None = None, **detail) -> None:
        """Record one change by this context's actor (DETAIL small: counts, not item lists)."""
        audit.record(self.conn, self.actor, action, project, **detail)
