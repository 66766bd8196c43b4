"""Build every Redis key name the tracker uses; nothing else concatenates key names.

A project's keys share the hash tag ``{PROJECT}`` so they live in one Redis Cluster slot and the
project's scripts stay atomic when projects are spread over a cluster. The names after the tag are
the ones the original tracker used (``todo``, ``out``, ``claims``, ``done``...), so an operator who
knows it finds their way.
"""

from __future__ import annotations

import re

# Global keys, outside any project's slot: only admin paths touch them, never a project's script.
PROJECTS = "tracker:projects"
GLOBAL_BLOCKED = "tracker:blocked"
GLOBAL_STATS = "tracker:stats"
SETTINGS_CHANNEL = "tracker:settings"
# Pub/sub: a claim that finds a queue under its refill target while segments of it wait on
# disk publishes the project's settings key here (claim-21.lua); `tracker maintain` refills.
REFILL_CHANNEL = "tracker:refill"
# Admin API: tokens (id -> record with the secret's hash), the audit log (capped stream), the
# warrior HQ document's global fields and the warrior registry (records and last-seen times,
# one hash tag so the registry's script stays in one Cluster slot).
ADMIN_TOKENS = "tracker:admin_tokens"
# When each token was last used (id -> ms), written at most once a minute per token per process.
ADMIN_TOKENS_USED = "tracker:admin_tokens_used"
AUDIT = "tracker:audit"
HQ = "tracker:hq"
WARRIORS = "tracker:{warriors}"
WARRIORS_SEEN = "tracker:{warriors}:seen"
# Deleted projects whose segment files a maintainer still has to remove from disk.
SEGMENTS_DELETED = "tracker:segments_deleted"
# While a backup runs (tracker_core.backup): its holder name, with a TTL; every other maintain
# lease is given up and none taken (tracker_core.offload.lease).
BACKUP_HOLD = "tracker:backup_hold"
# Webhooks (tracker_core.notify), one hash tag so each of their scripts stays in one Cluster slot:
# the hooks (id -> JSON record with its secret) and their delivery figures, what the detector
# last saw (field per project or node -> JSON), the outbox (delivery id -> JSON record; due:
# id -> when next tried, ms; claimed: id -> when its claim expires, ms; claims: id -> holder),
# its counters, and the lease of the one detector that reads the projects.
NOTIFY_HOOKS = "tracker:{notify}:hooks"
NOTIFY_HOOK_STATS = "tracker:{notify}:hook_stats"
NOTIFY_STATE = "tracker:{notify}:state"
NOTIFY_DELIVERIES = "tracker:{notify}:deliveries"
NOTIFY_DUE = "tracker:{notify}:due"
NOTIFY_CLAIMED = "tracker:{notify}:claimed"
NOTIFY_CLAIMS = "tracker:{notify}:claims"
NOTIFY_STATS = "tracker:{notify}:stats"
NOTIFY_LEASE = "tracker:{notify}:lease"

# The queues a claim visits after the downloader's own queue, in serve order.
SHARED_QUEUES = ("todo", "backfeed", "secondary", "redo")

PROJECT_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
# The names warriors may use (docs/protocol.md), anchored to the whole string as the request path does.
DOWNLOADER_RE = re.compile(r"[-_a-zA-Z0-9]{3,30}\Z")
RESERVED_PROJECT_NAMES = frozenset(
    {"api", "admin", "backfeed", "healthz", "metrics", "static", "projects.json"}
)


def valid_project_name(name: str) -> bool:
    return bool(PROJECT_NAME_RE.match(name)) and name not in RESERVED_PROJECT_NAMES


def project_of_settings(key: str) -> str | None:
    """The project whose settings key KEY (of any of its shards) is, or None for any other
    text: what the claim publishes on REFILL_CHANNEL is its settings key, as a script knows no
    project names. A shard's tag is ``{PROJECT.I}`` or ``{PROJECT.I.SALT}`` (shard_layout)."""
    if not key.startswith("{") or "}" not in key:
        return None
    inner = key[1 : key.index("}")]
    project, _, shard = inner.partition(".")
    if shard and not all(part.isascii() and part.isdigit() for part in shard.split(".")):
        return None
    tag = "{" + inner + "}"
    return project if valid_project_name(project) and key == ProjectKeys(project, tag).settings else None


def warrior_registrations(address_key: str) -> str:
    """Registrations from one address (or IPv6 /64) in the current window: the HQ's throttle."""
    return f"tracker:{{warriors}}:registrations:{address_key}"


class ProjectKeys:
    """Key names of one project; built once per project and cached by the engine."""

    __slots__ = (
        "project",
        "tag",
        "settings",
        "blocked",
        "blocked_global",
        "blocked_index",
        "todo",
        "backfeed",
        "secondary",
        "redo",
        "downloader_queues",
        "out",
        "claims",
        "done",
        "downloader_claims",
        "ratelimit",
        "stats",
        "log",
        "bad_dones",
        "uploads",
        "upload_targets",
        "downloader_count",
        "downloader_bytes",
        "downloader_version",
        "domain_bytes",
        "audit",
        "bloom",
        "backfeed_secrets",
        "backfeed_shards",
        "backfeed_shard_map",
        "limits",
        "limited",
        "limited_in",
        "limits_ready",
        "limit_tat",
        "reclaim_at",
        "reclaim_history",
        "dead",
        "segments",
        "offloading",
        "segment_queues",
        "segment_exports",
        "maintain_lease",
        "log_segments",
        "days",
    )

    def __init__(self, project: str, tag: str | None = None):
        """TAG: the hash tag of one of PROJECT's shards (tracker_core.project.shard_layout); by default
        ``{PROJECT}``, the tag of a one-shard project and of every project's first shard."""
        self.project = project
        tag = self.tag = "{" + project + "}" if tag is None else tag
        self.settings = f"{tag}:settings"
        # Blocks (tracker_core.blocks): the project's own entries, its copy of the global ones
        # (apart, so lifting one leaves the other), and the index the claim script reads.
        self.blocked = f"{tag}:blocked"
        self.blocked_global = f"{tag}:blocked_global"
        self.blocked_index = f"{tag}:blocked_index"
        self.todo = f"{tag}:todo"
        self.backfeed = f"{tag}:todo:backfeed"
        self.secondary = f"{tag}:todo:secondary"
        self.redo = f"{tag}:todo:redo"
        # Names of the downloaders that have a queue of their own, so status never needs KEYS.
        self.downloader_queues = f"{tag}:todo:d"
        self.out = f"{tag}:out"
        self.claims = f"{tag}:claims"
        self.done = f"{tag}:done"
        self.downloader_claims = f"{tag}:downloader_claims"
        self.ratelimit = f"{tag}:ratelimit"
        self.stats = f"{tag}:stats"
        self.log = f"{tag}:log"
        self.bad_dones = f"{tag}:bad_dones"
        self.uploads = f"{tag}:uploads"
        self.upload_targets = f"{tag}:upload_targets"
        self.downloader_count = f"{tag}:downloader_count"
        self.downloader_bytes = f"{tag}:downloader_bytes"
        self.downloader_version = f"{tag}:downloader_version"
        self.domain_bytes = f"{tag}:domain_bytes"
        self.audit = f"{tag}:audit"
        # Backfeed: the Bloom filter's geometry and counts (its bitmaps are bloom_chunk keys),
        # the hashes of the backfeed secrets, items per shard, and shard -> queue mapping.
        self.bloom = f"{tag}:bloom"
        self.backfeed_secrets = f"{tag}:backfeed_secrets"
        self.backfeed_shards = f"{tag}:backfeed_shards"
        self.backfeed_shard_map = f"{tag}:backfeed_shard_map"
        # Pattern and item-type limits: name -> JSON {pattern, rate, rate_per_s, seq}.
        self.limits = f"{tag}:limits"
        # Items held back by a limit: a score-0 zset of "LIMIT\0ITEM" (one lex range per limit),
        # the set new ones pass through on their way in, the limits that have items (score: when
        # their bucket next has a token, ms) and the buckets of limits whose items ran out.
        self.limited = f"{tag}:todo:limited"
        self.limited_in = f"{tag}:todo:limited_in"
        self.limits_ready = f"{tag}:limits_ready"
        self.limit_tat = f"{tag}:limit_tat"
        # No longer written: claimed item -> when it may be reclaimed (ms), now `out`'s score.
        # Named so that `tracker maintain` (admin.upgrades) and project deletion remove it.
        self.reclaim_at = f"{tag}:reclaim_at"
        # Earlier claim rounds of items claimed more than once: item -> JSON list (capped).
        self.reclaim_history = f"{tag}:reclaim_history"
        self.dead = f"{tag}:dead"
        # Offloading: segment number -> items in its file (the registry decides what exists), the
        # items on their way to a segment file, and the segment counter (field "seq" of segments).
        self.segments = f"{tag}:segments"
        self.offloading = f"{tag}:offloading"
        # Segment number -> the queue its items came from (todo, backfeed, secondary, redo, or
        # done); field "#staged" names the number and source of the set in `offloading`. Exported
        # segments that may come back once: digest of their items -> "ITEMS QUEUE". The lease of
        # the one maintainer that may move this project's segments (holder id, expiry).
        self.segment_queues = f"{tag}:segment_queues"
        self.segment_exports = f"{tag}:segment_exports"
        self.maintain_lease = f"{tag}:maintain_lease"
        # The done log's archive (tracker_core.donelog.log_archive): segment number -> "FIRST_ID LAST_ID
        # ENTRIES", '#archived' (the last entry id on disk) and '#next' (the last number used).
        self.log_segments = f"{tag}:log_segments"
        # The per-day roll-up of the hour hashes, kept for the project's life: day number ->
        # "items bytes requests served backlog" (one small field a day, deleted with the project).
        self.days = f"{tag}:days"

    def downloader_queue(self, downloader: str) -> str:
        return f"{self.tag}:todo:d:{downloader}"

    def bloom_chunk(self, layer: int, chunk: int) -> str:
        """One bitmap of the Bloom filter: layers grow the filter, chunks keep each under 512 MB."""
        return f"{self.tag}:bloom:{layer}:{chunk}"

    def bloom_stash(self, layer: int) -> str:
        """A fingerprint layer's items whose two buckets were both full (a set, rarely used)."""
        return f"{self.tag}:bloom:{layer}:stash"

    def minute(self, minute: int) -> str:
        """Per-minute counters (requests, items, bytes), kept two days for the charts."""
        return f"{self.tag}:minute:{minute}"

    def uniques(self, kind: str, day: int) -> str:
        """HyperLogLog of the downloaders or IPs (KIND) seen on DAY (days since the epoch, UTC)."""
        if kind not in ("downloaders", "ips"):
            raise ValueError(f"unknown uniques kind {kind!r}")
        return f"{self.tag}:uniq:{kind}:{day}"

    def hour(self, hour: int) -> str:
        """Per-hour roll-up of the minute counters (charts past two days), kept 60 days."""
        return f"{self.tag}:hour:{hour}"

    def top_history(self, interval_s: int) -> str:
        """Capped stream of the top downloaders' item counts, one entry per INTERVAL_S seconds."""
        return f"{self.tag}:top_history:{int(interval_s)}"

    def queue(self, name: str) -> str:
        """Key of a queue named as the CLI and admin API name them."""
        if name == "todo":
            return self.todo
        if name in ("backfeed", "secondary", "redo"):
            return getattr(self, name)
        if name.startswith("downloader:"):
            downloader = name[len("downloader:") :]
            # A queue no valid downloader name can ask for would strand its items.
            if not DOWNLOADER_RE.match(downloader):
                raise ValueError(f"bad downloader name {downloader!r} in queue {name!r}")
            return self.downloader_queue(downloader)
        raise ValueError(f"unknown queue {name!r}")

    def queue_and_owner(self, name: str) -> tuple[str, str]:
        """(key, owner) of a queue named as the CLI and admin API name them: OWNER is the
        downloader of a `downloader:NAME` queue (whose items no limit holds), else ''."""
        key = self.queue(name)
        return key, name[len("downloader:") :] if name.startswith("downloader:") else ""

    def shared_queues(self) -> tuple[str, ...]:
        return (self.todo, self.backfeed, self.secondary, self.redo)
