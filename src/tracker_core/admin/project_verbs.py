"""Projects: create, list, show, change settings, pause, resume, upload targets, delete."""

from __future__ import annotations

from tracker_core import keyspace, scripts
from tracker_core.admin import limit_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput, Conflict, NotFound
from tracker_core.figures import stats
from tracker_core.infra import redis_clock
from tracker_core.items import bloom
from tracker_core.offload import segment_registry
from tracker_core.project import pattern_limits, settings_schema, shard_layout
from tracker_core.scripts.constants import REFILL_WATCH_FIELD, SETTINGS_PAD_FIELD

DELETE_CHUNK = 500  # keys per UNLINK
# Reads and checks of the offload settings before giving up on a change another admin keeps
# racing: each try fails only if that other change landed between this one's read and write.
OFFLOAD_CHECK_TRIES = 5
UPLOAD_TARGET_STATES = ("active", "inactive", "remove")


def _validated(values: dict) -> dict[str, str]:
    if not isinstance(values, dict):
        raise BadInput("'settings' must be an object")
    out = {}
    for name, value in values.items():
        try:
            out[name] = settings_schema.validate(name, value)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    return out


def _refuse_stranding(values: dict[str, str]) -> None:
    """BadInput when VALUES, a project's whole settings, could leave offloaded items on disk."""
    problem = settings_schema.offload_rules(values).problem
    if problem is not None:
        raise BadInput(problem)


def _offload_checked(ctx: AdminContext, k: keyspace.ProjectKeys, values: dict[str, str]) -> dict:
    """Check the offload settings as they would be after VALUES (BadInput if they could strand
    items); the stored fields the check read, for set_settings to expect ({}: VALUES changes
    none of them, and no check is due: a project an older tracker left with bad ones may
    still change its other settings)."""
    if not set(values) & set(settings_schema.OFFLOAD_FIELDS):
        return {}
    stored = settings_schema.read_offload(ctx.conn, k.settings)
    after = {name: value for name, value in stored.items() if value is not None} | values
    _refuse_stranding({name: value for name, value in after.items() if value != ""})
    return {name: value or "" for name, value in stored.items()}


def list_projects(ctx: AdminContext) -> list[str]:
    return sorted(ctx.conn.smembers(keyspace.PROJECTS))


def create(ctx: AdminContext, project: str, settings: dict | None = None, shards=1) -> dict:
    """Create PROJECT with default settings, overridden by SETTINGS, over SHARDS shards
    (docs/sharding.md); Conflict if it exists.

    The shards past the first are written first: the first shard's settings are what makes the
    project exist for every node, and they name all the shards."""
    values = dict(settings or {})
    if type(shards) is not int or not 1 <= shards <= shard_layout.MAX_SHARDS:
        raise BadInput(f"'shards' must be a whole number from 1 to {shard_layout.MAX_SHARDS}")
    k = ctx.keys(project, must_exist=False)
    initial = settings_schema.defaults() | _validated(values)
    _refuse_stranding(initial)  # before the write: nothing stored to race with
    if ctx.conn.exists(k.settings):
        raise Conflict(f"project {project!r} already exists")
    layout = shard_layout.ShardLayout(
        project, shard_layout.choose_tags(project, shards, shard_layout.slot_owner(ctx.conn))
    )
    if layout.sharded:
        initial[shard_layout.SHARD_TAGS_FIELD] = " ".join(layout.tags)
        initial[shard_layout.SHARE_FIELD] = repr(1 / shards)
    now_ms = redis_clock.now_ms(ctx.conn)
    for shard in layout.keys[1:] + layout.keys[:1]:
        created = scripts.create_project(ctx.conn, shard, now_ms=now_ms, settings=initial)
    ctx.conn.sadd(keyspace.PROJECTS, project)
    if created != scripts.create_project.codes.CREATED:
        raise Conflict(f"project {project!r} already exists")
    # After joining PROJECTS: a global block made meanwhile either is read here or finds this
    # project in its loop over PROJECTS.
    glob = set(ctx.conn.smembers(keyspace.GLOBAL_BLOCKED))
    for shard in ctx.shards(project):
        limit_verbs.write_blocks(ctx, shard, lambda own, copy: (own, glob))
    ctx.audit("project.create", project, settings=values, **({"shards": shards} if shards > 1 else {}))
    return {"created": project, "shards": shards}


def show(ctx: AdminContext, project: str) -> dict:
    k = ctx.keys(project)
    values = settings_schema.with_stored(ctx.conn.hgetall(k.settings))
    layout = shard_layout.ShardLayout.from_settings(project, values)
    for internal in (shard_layout.SHARD_TAGS_FIELD, shard_layout.SHARE_FIELD):
        values.pop(internal, None)
    return {
        "project": project,
        "settings": values,
        # Where each shard lives: its hash tag, slot and (on a Cluster) primary.
        "shards": layout.describe(shard_layout.slot_owner(ctx.conn)),
        # Settings an older tracker let through that could strand offloaded items (maintain
        # refills with safe stand-ins meanwhile): why, or None.
        "offload_warning": settings_schema.offload_rules(values).problem,
        "upload_targets": ctx.conn.hgetall(k.upload_targets),
        "blocked": sorted(ctx.conn.smembers(k.blocked)),
        "blocked_global": sorted(ctx.conn.smembers(k.blocked_global)),
    }


def store_settings(ctx: AdminContext, k: keyspace.ProjectKeys, values: dict[str, str]) -> int:
    """Validate and store VALUES in one script (none: only bump the age); the new age.

    A change to the offload settings is checked with the stored ones as a whole, and the script
    writes only if those are still what the check read (else: read, check and try again).
    Every node's settings cache notices the new age (published) and reloads.
    """
    values = _validated(values)
    for _ in range(OFFLOAD_CHECK_TRIES):
        expected = _offload_checked(ctx, k, values)
        age = scripts.set_settings(
            ctx.conn, k, channel=keyspace.SETTINGS_CHANNEL, values=values, expected=expected
        )
        if age != scripts.set_settings.codes.CHANGED:
            break
    else:
        raise Conflict(f"the offload settings of {k.project!r} kept changing while being checked: try again")
    if age == scripts.set_settings.codes.UNKNOWN_PROJECT:
        raise NotFound(f"unknown project {k.project!r}")
    if age < 0:
        raise Conflict(f"the settings of {k.project!r} are damaged (settings_age is not a number)")
    return age


def store_everywhere(ctx: AdminContext, project: str, values: dict[str, str]) -> int:
    """store_settings on every shard of PROJECT, its first shard last; the first shard's new age.

    Each shard's change is atomic on its own; between two of them a claim on a shard not yet
    written sees the settings of a moment ago (docs/sharding.md, "Project-wide rules")."""
    values = _validated(values)  # refused before any read: a refusal touches nothing
    for k in ctx.shards(project):
        age = store_settings(ctx, k, values)
    return age


def set_settings(ctx: AdminContext, project: str, values: dict) -> dict:
    """Change settings (name -> text); the new settings age."""
    if not isinstance(values, dict) or not values:
        raise BadInput("no settings given")
    age = store_everywhere(ctx, project, values)
    ctx.audit("project.settings", project, settings=dict(values))
    return {"settings_age": age}


def _pause(ctx: AdminContext, project: str, paused: bool) -> dict:
    age = store_everywhere(ctx, project, {"paused": "1" if paused else "0"})
    ctx.audit("project.pause" if paused else "project.resume", project)
    return {"settings_age": age, "paused": paused}


def pause(ctx: AdminContext, project: str) -> dict:
    """Stop handing out items (requests get 404)."""
    return _pause(ctx, project, True)


def resume(ctx: AdminContext, project: str) -> dict:
    return _pause(ctx, project, False)


def set_upload_target(ctx: AdminContext, project: str, url: str, state: str = "active") -> dict:
    """Mark URL active or inactive, or remove it; bumps the settings age (nodes reload)."""
    k = ctx.keys(project)
    if state not in UPLOAD_TARGET_STATES:
        raise BadInput("'state' must be active, inactive or remove")
    if type(url) is not str or (state != "remove" and not settings_schema.valid_upload_target(url)):
        raise BadInput(f"bad upload target {str(url)[:200]!r}: must match ^rsync://.+/$ or ^https?://.+/$")
    if state == "remove":
        ctx.conn.hdel(k.upload_targets, url)
    else:
        ctx.conn.hset(k.upload_targets, url, state)
    store_settings(ctx, k, {})
    shown = "removed" if state == "remove" else state
    ctx.audit("upload_target", project, url=url, state=shown)
    return {"url": url, "state": shown}


def delete(ctx: AdminContext, project: str) -> dict:
    """Delete PROJECT and its keys on every shard, without KEYS and without blocking Redis.

    The first shard's settings go first, so the hot path sees an unknown project at once; then
    every known key is UNLINKed (freed in the background), downloader queues found through their
    index, and the time-bucketed counters over the spans they can live (they would expire anyway).
    """
    shards = ctx.shards(project)
    r = ctx.conn
    r.unlink(shards[-1].settings)
    r.srem(keyspace.PROJECTS, project)
    segment_registry.forget_project(r, project)  # a maintainer removes its segment files
    now_ms = redis_clock.now_ms(r)
    for k in shards:
        _unlink_shard(r, k, now_ms)
    ctx.audit("project.delete", project)
    return {"deleted": project}


def _unlink_shard(r, k: keyspace.ProjectKeys, now_ms: int) -> None:
    fixed = [
        getattr(k, name)
        for name in keyspace.ProjectKeys.__slots__
        if name not in ("project", "tag", "downloader_queues")
    ]
    owners = [k.downloader_queue(o) for o in r.sscan_iter(k.downloader_queues)]
    minutes = [k.minute(m) for m in range(now_ms // 60000 - 2 * 1440, now_ms // 60000 + 2)]
    hours = [k.hour(h) for h in range(now_ms // 3_600_000 - 61 * 24, now_ms // 3_600_000 + 2)]
    days = range(now_ms // 86_400_000 - 63, now_ms // 86_400_000 + 2)
    uniques = [k.uniques(kind, d) for d in days for kind in ("downloaders", "ips")]
    history = [k.top_history(s) for s, _, _ in stats.TOP_HISTORY_TIERS]
    every = (
        fixed
        + owners
        + [k.downloader_queues]
        + minutes
        + hours
        + uniques
        + history
        + bloom.all_chunk_keys(r, k)
    )
    for i in range(0, len(every), DELETE_CHUNK):
        r.unlink(*every[i : i + DELETE_CHUNK])


# Settings fields a new shard does not copy from the first: the script writes its own age, the
# pad and the refill watch belong to each shard's own hash, and the layout fields are new.
_NOT_COPIED = (
    "settings_age",
    SETTINGS_PAD_FIELD,
    REFILL_WATCH_FIELD,
    shard_layout.SHARD_TAGS_FIELD,
    shard_layout.SHARE_FIELD,
    shard_layout.GENERATIONS_FIELD,
)


def grow(ctx: AdminContext, project: str, shards) -> dict:
    """Give PROJECT SHARDS shards in all, adding to the ones it has (docs/sharding.md, "Adding
    shards"): items stay where they are; new items spread over every shard from then on.

    Each new shard is made whole first (settings, blocks, limits and backfeed secrets copied
    from the first shard); then every shard's layout fields are changed, the first shard last,
    which is when the nodes (following its settings age) start using the new shards."""
    layout = ctx.layout(project)
    if type(shards) is not int or not 1 <= shards <= shard_layout.MAX_SHARDS:
        raise BadInput(f"'shards' must be a whole number from 1 to {shard_layout.MAX_SHARDS}")
    if shards <= layout.count:
        raise BadInput(
            f"{project!r} has {layout.count} shard(s): shards can only be added (its items "
            "stay where they are), never taken away or moved"
        )
    r = ctx.conn
    first = layout.keys[0]
    stored = r.hgetall(first.settings)
    tags = shard_layout.more_tags(project, list(layout.tags), shards, shard_layout.slot_owner(r))
    generations = [*layout.generations, layout.count]
    fields = {
        shard_layout.SHARD_TAGS_FIELD: " ".join(tags),
        shard_layout.GENERATIONS_FIELD: " ".join(map(str, generations)),
        shard_layout.SHARE_FIELD: repr(1 / shards),
    }
    copied = {name: value for name, value in stored.items() if name not in _NOT_COPIED} | fields
    own, copy = (set(r.smembers(first.blocked)), set(r.smembers(first.blocked_global)))
    rules = pattern_limits.load(r, first)
    secret_records = r.hgetall(first.backfeed_secrets)
    now_ms = redis_clock.now_ms(r)
    for tag in tags[layout.count :]:
        k = keyspace.ProjectKeys(project, tag)
        if (
            scripts.create_project(r, k, now_ms=now_ms, settings=copied)
            != scripts.create_project.codes.CREATED
        ):
            # Left by a grow that stopped half-way (the first shard never named it): made whole again.
            scripts.set_settings(r, k, channel=keyspace.SETTINGS_CHANNEL, values=copied)
        limit_verbs.write_blocks(ctx, k, lambda _own, _copy: (own, copy))
        for rule in rules:
            pattern_limits.add(r, k, rule.name, rule.pattern, rule.rate)
        if secret_records:
            r.hset(k.backfeed_secrets, mapping=secret_records)
    for k in layout.keys[1:] + layout.keys[:1]:
        scripts.set_settings(r, k, channel=keyspace.SETTINGS_CHANNEL, values=fields)
    ctx.audit("project.grow", project, shards=shards, before=layout.count)
    return {"project": project, "shards": shards, "before": layout.count}
