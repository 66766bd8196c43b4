"""One typed function per Lua script: the only place that knows each script's KEYS and ARGV order.

Callers pass a project's ``keys.ProjectKeys`` (or the few global keys) and named arguments and
get a typed reply (a named tuple, or a plain number whose codes are in ``reply_codes``), never a
raw reply list. Each function is named after its script (``lua/NAME-NKEYS.lua``) and passes
exactly the keys its contract header lists; tests/lua/test_contract.py checks both. Where the
caller picks a key (a queue: ``queue``, ``target``, ``source``/``source_key``, ``counted``), it
passes the name keys.ProjectKeys built for it; every other key comes from K here.

CONN is any connection of ``tracker_core.connection`` (the hot path's RawRedis or a topology
client, or the admin paths' redis-py client): replies come back as text, with names that are not
UTF-8 kept byte for byte through surrogateescape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tracker_core import keys as keyspace
from tracker_core.scripts import run

DAY_MS = 86_400_000
MINUTE_MS = 60_000
# A named tuple from a sequence at C speed (the class call runs a Python __new__): the request
# hot path builds one per claim and per done.
_make = tuple.__new__


def wire(name):
    """NAME as the bytes Redis holds: a name queued before names had to be UTF-8 reads back
    with surrogateescape, and the client's packer refuses lone surrogates (one such name would
    stop every admin verb over its queue)."""
    return name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name


def _pairs(names: Sequence, held: Sequence) -> list:
    """NAMES and their held entries ("LIMIT\\0NAME" or '') interleaved, as the bytes Redis holds."""
    return [wire(x) for pair in zip(names, held, strict=True) for x in pair]


# -- the request hot path ------------------------------------------------------------------------


class ClaimReply(NamedTuple):
    code: int  # reply_codes.Claim
    settings_age: int
    items: list


def claim_keys(k: keyspace.ProjectKeys, downloader: str, now_ms: int) -> tuple:
    """The KEYS of claim-21.lua for DOWNLOADER at NOW_MS (tests also send it odd ARGV)."""
    day = now_ms // DAY_MS
    return (
        k.settings,
        k.blocked_index,
        k.downloader_queue(downloader),
        k.todo,
        k.backfeed,
        k.secondary,
        k.redo,
        k.out,
        k.claims,
        k.downloader_claims,
        k.ratelimit,
        k.stats,
        k.minute(now_ms // MINUTE_MS),
        k.uniques("downloaders", day),
        k.uniques("ips", day),
        k.limited,
        k.limits_ready,
        k.limit_tat,
        k.limits,
        k.dead,
        k.reclaim_history,
    )


def claim(
    conn,
    k: keyspace.ProjectKeys,
    *,
    now_ms: int,
    downloader: str,
    ip: str,
    wanted: int,
    ip_key: str,
    counted_under: str = "",
    downloader_counted: bool = False,
    ip_counted: bool = False,
) -> ClaimReply:
    """Hand up to WANTED items to DOWNLOADER (claim-21.lua); IP_KEY is blocks.ip_key(IP).

    DOWNLOADER_COUNTED and IP_COUNTED: the caller already counted them in today's uniques of
    the project whose created_ms is COUNTED_UNDER (the script then skips their PFADD).
    """
    args = (
        now_ms,
        downloader,
        ip,
        wanted,
        ip_key,
        counted_under,
        "1" if downloader_counted else "0",
        "1" if ip_counted else "0",
    )
    return claim_reply(run(conn, "claim", claim_keys(k, downloader, now_ms), args))


def claim_reply(reply: list) -> ClaimReply:
    """claim-21.lua's REPLY as a ClaimReply (also for the engine's packed claim)."""
    return _make(ClaimReply, (reply[0], int(reply[1]), reply[2:]))


class DoneReply(NamedTuple):
    code: int  # reply_codes.Done
    settings_age: int
    new: int
    repeated: int
    unknown: int
    refused: int
    clamped: int


def done_keys(k: keyspace.ProjectKeys, downloader: str, now_ms: int) -> tuple:
    """The KEYS of done-20.lua for a done by DOWNLOADER at NOW_MS (tests also send it odd ARGV)."""
    return (
        k.settings,
        k.out,
        k.claims,
        k.done,
        k.downloader_claims,
        k.log,
        k.downloader_count,
        k.downloader_bytes,
        k.downloader_version,
        k.domain_bytes,
        k.stats,
        k.minute(now_ms // MINUTE_MS),
        k.todo,
        k.backfeed,
        k.secondary,
        k.redo,
        k.downloader_queue(downloader),
        k.bad_dones,
        k.reclaim_history,
        k.dead,
    )


def done(
    conn,
    k: keyspace.ProjectKeys,
    *,
    now_ms: int,
    downloader: str,
    version: str,
    item_id: str,
    ip: str,
    domain_bytes: Sequence,
    items: Sequence,
) -> DoneReply:
    """Mark ITEMS done for DOWNLOADER (done-20.lua); DOMAIN_BYTES is a flat (domain, bytes) list."""
    argv = (now_ms, downloader, version, item_id, ip, len(domain_bytes) // 2, *domain_bytes, *items)
    return done_reply(run(conn, "done", done_keys(k, downloader, now_ms), argv))


def done_reply(reply: list) -> DoneReply:
    """done-20.lua's REPLY as a DoneReply (also for the engine's packed done)."""
    if len(reply) < 7:  # unknown project: {-1, 0}
        return DoneReply(reply[0], int(reply[1]), 0, 0, 0, 0, 0)
    reply[1] = int(reply[1])
    return _make(DoneReply, reply)


class BuryReply(NamedTuple):
    code: int  # reply_codes.BuryUnservable
    buried: int


def bury_unservable(
    conn, k: keyspace.ProjectKeys, *, now_ms: int, downloader: str, reasons: Sequence
) -> BuryReply:
    """Send claims of DOWNLOADER to `dead` (bury_unservable-7.lua); REASONS: flat (item, why)."""
    reply = run(
        conn,
        "bury_unservable",
        (
            k.settings,
            k.out,
            k.claims,
            k.downloader_claims,
            k.reclaim_history,
            k.dead,
            k.stats,
        ),
        (now_ms, downloader, *reasons),
    )
    return BuryReply(*reply)


class ReleaseReply(NamedTuple):
    code: int  # reply_codes.Release
    settings_age: int
    released: int
    ignored: int
    held: int


def release(
    conn,
    k: keyspace.ProjectKeys,
    *,
    now_ms: int,
    downloader: str,
    age: str,
    items: Sequence,
    held: Sequence,
) -> ReleaseReply:
    """Give claims back (release-8.lua): DOWNLOADER's, or anyone's for ''; AGE is the settings
    age HELD (per item "LIMIT\\0ITEM" or '') was classified at, '' for no check."""
    reply = run(
        conn,
        "release",
        (k.settings, k.out, k.claims, k.todo, k.downloader_claims, k.stats, k.limited_in, k.reclaim_history),
        (now_ms, downloader, age, *_pairs(items, held)),
    )
    if len(reply) < 5:  # unknown project or a stale age: {code, age}
        return ReleaseReply(reply[0], int(reply[1]), 0, 0, 0)
    return ReleaseReply(reply[0], int(reply[1]), *reply[2:])


class UploadedReply(NamedTuple):
    code: int  # reply_codes.Uploaded
    settings_age: int


def uploaded(
    conn, k: keyspace.ProjectKeys, *, now_ms: int, uploader: str, item: str, server: str
) -> UploadedReply:
    """Record that UPLOADER uploaded ITEM's data to SERVER (uploaded-3.lua)."""
    code, age = run(conn, "uploaded", (k.settings, k.uploads, k.stats), (now_ms, uploader, item, server))
    return UploadedReply(code, int(age))


def _waiting_places(k: keyspace.ProjectKeys) -> tuple:
    """Where an item waits to be served, in the order item_status and redo_items take them: the
    shared queues, the held items and their way in, the limits that hold some, the limits, the
    set on its way to a segment file, and the segments."""
    return (
        k.todo,
        k.backfeed,
        k.secondary,
        k.redo,
        k.limited,
        k.limited_in,
        k.limits_ready,
        k.limits,
        k.offloading,
        k.segments,
    )


class ItemStatusReply(NamedTuple):
    code: int  # reply_codes.ItemStatus
    status: str  # out, done, dead, todo, offloaded, or '' (found nowhere here)
    queue: str
    detail: str
    owners: int
    segments: int
    out_score: str  # out: its `out` score ('' otherwise)
    extra: str  # out: earlier claim rounds (JSON or ''); offloaded: the staged segment's number


def item_status(conn, k: keyspace.ProjectKeys, *, item: str, owners: Sequence[str]) -> ItemStatusReply:
    """Every place ITEM can be (item_status-n.lua), looking in the queues of OWNERS."""
    reply = run(
        conn,
        "item_status",
        (
            k.settings,
            k.claims,
            k.done,
            k.dead,
            *_waiting_places(k),
            k.segment_queues,
            k.downloader_queues,
            k.out,
            k.reclaim_history,
            *[k.downloader_queue(o) for o in owners],
        ),
        (item, *owners),
    )
    return ItemStatusReply(*reply)


# -- projects, settings, limits, blocks ---------------------------------------------------------


def create_project(
    conn, k: keyspace.ProjectKeys, *, now_ms: int, settings: dict, blocked: Sequence = ()
) -> int:
    """Create K's project with SETTINGS unless it exists (create_project-3.lua); reply_codes.CreateProject."""
    flat = [x for pair in settings.items() for x in pair]
    return run(
        conn, "create_project", (k.settings, k.blocked, k.stats), (now_ms, *flat, "--blocked", *blocked)
    )


def pad_hashes(conn, k: keyspace.ProjectKeys) -> int:
    """Give K's settings and stats the fields that keep them hashtables (pad_hashes-2.lua);
    reply_codes.PadHashes."""
    return run(conn, "pad_hashes", (k.settings, k.stats), ())


def set_settings(
    conn, k: keyspace.ProjectKeys, *, channel: str, values: dict, expected: dict | None = None
) -> int:
    """Store VALUES ('' deletes a field) and bump the age (set_settings-1.lua), provided the
    stored fields still hold EXPECTED ('' for absent): the new age, or a reply_codes.SetSettings
    code."""
    expected = expected or {}
    flat = [x for pair in (*expected.items(), *values.items()) for x in pair]
    return run(conn, "set_settings", (k.settings,), (k.project, channel, len(expected), *flat))


def set_limit(
    conn, k: keyspace.ProjectKeys, *, channel: str, op: str, name: str, record: str, max_limits: int
) -> int:
    """Set (OP 'set', RECORD the JSON) or remove (OP 'remove') limit NAME (set_limit-4.lua): the
    new settings age, or a reply_codes.SetLimit code."""
    return run(
        conn,
        "set_limit",
        (k.settings, k.limits, k.limits_ready, k.limit_tat),
        (k.project, channel, op, name, record, max_limits),
    )


def hold_limited(conn, k: keyspace.ProjectKeys, *, most: int) -> int:
    """File up to MOST held items from the way-in set (hold_limited-4.lua): how many moved, or
    reply_codes.HoldLimited.BAD_ARGUMENT."""
    return run(conn, "hold_limited", (k.limited_in, k.limited, k.limits_ready, k.limit_tat), (most,))


def hold_queued(conn, k: keyspace.ProjectKeys, *, queue: str, items: Sequence, held: Sequence) -> int:
    """Move ITEMS still in QUEUE to the way-in set as HELD (hold_queued-2.lua): how many moved."""
    return run(conn, "hold_queued", (queue, k.limited_in), _pairs(items, held))


def set_blocks(
    conn,
    k: keyspace.ProjectKeys,
    *,
    own_read: Sequence,
    copy_read: Sequence,
    own: Sequence,
    copy: Sequence,
    index: Sequence,
) -> int:
    """Replace K's blocks (own entries, copy of the global ones) and their INDEX, unless they
    changed since the caller read OWN_READ and COPY_READ (set_blocks-4.lua); reply_codes.SetBlocks."""
    return run(
        conn,
        "set_blocks",
        (k.settings, k.blocked, k.blocked_global, k.blocked_index),
        (len(own_read), len(copy_read), len(own), len(copy), *own_read, *copy_read, *own, *copy, *index),
    )


# -- the Bloom filter -----------------------------------------------------------------------------


class BloomAddReply(NamedTuple):
    code: int  # reply_codes.BloomAdd
    new: int
    seen: int


def bloom_add(
    conn,
    k: keyspace.ProjectKeys,
    *,
    chunk_keys: Sequence[str],
    target: str,
    counted: str,
    layers: int,
    last_capacity: int,
    owner: str,
    secret_digest: str,
    shard: str,
    new_field: str,
    seen_field: str,
    count: int,
    bound: int,
    kind: str = "layered",
    ks: Sequence[int],
    hashed: Sequence,
) -> BloomAddReply:
    """Queue into TARGET the COUNT entries the filter has not seen (bloom_add-n.lua).

    CHUNK_KEYS, LAYERS, LAST_CAPACITY, KIND and KS come from the caller's bloom.Plan, HASHED
    from Plan.args; COUNTED is the other set the BOUND counts (see the contract).
    """
    reply = run(
        conn,
        "bloom_add",
        (
            k.settings,
            target,
            k.stats,
            k.bloom,
            k.downloader_queues,
            k.backfeed_secrets,
            k.backfeed_shards,
            k.limited,
            counted,
            *chunk_keys,
        ),
        (
            layers,
            last_capacity,
            owner,
            secret_digest,
            shard,
            new_field,
            seen_field,
            count,
            bound,
            kind,
            *ks,
            *hashed,
        ),
    )
    return BloomAddReply(int(reply[0]), int(reply[1]), int(reply[2]))


BLOOM_FIXED_KEYS = 9  # keys of bloom_add before the bitmaps (the hash plan indexes KEYS past them)


def bloom_configure(
    conn,
    k: keyspace.ProjectKeys,
    *,
    capacity: int,
    fp_rate: str,
    growth: int,
    tightening: str,
    chunk_bits: int,
    replace: bool,
    kind: str = "layered",
    bits_per_item: int = 35,
    salt: str = "",
    block: int = 0,
) -> dict | int:
    """Fix the filter's geometry while it is empty (bloom_configure-2.lua): the geometry in
    force as a dict of text (with its secret salt: keep it out of any output), or a
    reply_codes.BloomConfigure code. KIND, BITS_PER_ITEM, SALT and BLOCK (a fingerprint filter's
    buckets per block, 0 for none): see tracker_core.bloom."""
    argv = (capacity, fp_rate, growth, tightening, chunk_bits, "1" if replace else "0", kind, bits_per_item)
    reply = run(conn, "bloom_configure", (k.settings, k.bloom), (*argv, salt, block))
    if len(reply) == 1:
        return reply[0]
    return dict(zip(reply[::2], reply[1::2]))


# -- queues and items (admin) ---------------------------------------------------------------------


def clear_queue(conn, k: keyspace.ProjectKeys, *, queue: str) -> int:
    """Drop every item of QUEUE (clear_queue-2.lua): how many, or reply_codes.ClearQueue."""
    return run(conn, "clear_queue", (k.settings, queue), ())


def move_items(
    conn, k: keyspace.ProjectKeys, *, source: str, target: str, owner: str, items: Sequence, held: Sequence
) -> int:
    """Move ITEMS still in SOURCE to TARGET (owned by downloader OWNER, or ''), HELD ones to the
    way-in set (move_items-5.lua): how many moved, or a reply_codes.MoveItems code."""
    return run(
        conn,
        "move_items",
        (k.settings, source, target, k.downloader_queues, k.limited_in),
        (owner, *_pairs(items, held)),
    )


def requeue_dead(
    conn, k: keyspace.ProjectKeys, *, target: str, owner: str, items: Sequence, held: Sequence
) -> int:
    """Put dead ITEMS back into TARGET, HELD ones to the way-in set (requeue_dead-5.lua): how
    many were dead, or reply_codes.RequeueDead.NOT_PAIRS."""
    return run(
        conn,
        "requeue_dead",
        (k.dead, target, k.stats, k.limited_in, k.downloader_queues),
        (owner, *_pairs(items, held)),
    )


class RedoReply(NamedTuple):
    code: int  # reply_codes.RedoItems
    settings_age: int
    from_done: int = 0
    from_seen: int = 0
    held: int = 0
    out: int = 0
    queued: int = 0
    dead: int = 0
    offloaded: int = 0
    not_seen: int = 0
    maybe_offloaded: int = 0

    def counts(self) -> dict[str, int]:
        """The per-name counts by field (from_done ... maybe_offloaded)."""
        return {field: int(getattr(self, field)) for field in self._fields[2:]}


def redo_items(
    conn,
    k: keyspace.ProjectKeys,
    *,
    age: str,
    target: str,
    owner: str,
    even_if_offloaded: bool,
    owners: Sequence[str],
    items: Sequence,
    held: Sequence,
    seen: Sequence[bool],
) -> RedoReply:
    """Re-queue ITEMS into TARGET on purpose (redo_items-n.lua).

    AGE: the settings age HELD was classified at ('' for no check); OWNERS: every downloader
    todo:d lists, in that order; SEEN: per item, whether the Bloom filter has seen it.
    """
    args = [age, owner, "1" if even_if_offloaded else "0", len(owners), *owners]
    for name, entry, was_seen in zip(items, held, seen, strict=True):
        args += [wire(name), wire(entry), "1" if was_seen else "0"]
    reply = run(
        conn,
        "redo_items",
        (
            k.settings,
            k.done,
            k.out,
            k.claims,
            k.dead,
            *_waiting_places(k),
            k.stats,
            target,
            k.downloader_queues,
            *[k.downloader_queue(o) for o in owners],
        ),
        args,
    )
    return RedoReply(reply[0], int(reply[1]), *reply[2:])


# -- offloading, segments, the maintenance lease, the log archive ---------------------------------


def maintain_lease(
    conn, k: keyspace.ProjectKeys, *, holder: str, lease_ms: int, release: bool = False
) -> int:
    """Take or renew (or with RELEASE give up) K's maintenance lease (maintain_lease-1.lua);
    reply_codes.MaintainLease."""
    args = (holder, lease_ms, "release") if release else (holder, lease_ms)
    return run(conn, "maintain_lease", (k.maintain_lease,), args)


class StageReply(NamedTuple):
    code: int  # the segment number reserved (> 0), or reply_codes.OffloadStage
    items: list


def offload_stage(
    conn, k: keyspace.ProjectKeys, *, holder: str, source: str, source_key: str, count: int
) -> StageReply:
    """Take up to COUNT items of SOURCE (its key SOURCE_KEY) into the offloading set
    (offload_stage-5.lua)."""
    reply = run(
        conn,
        "offload_stage",
        (k.maintain_lease, source_key, k.offloading, k.segments, k.segment_queues),
        (holder, count, source),
    )
    return StageReply(int(reply[0]), reply[1:])


def offload_commit(
    conn, k: keyspace.ProjectKeys, *, holder: str, number: int, count: int, source: str
) -> int:
    """Register segment NUMBER's file (COUNT items of SOURCE) and drop its staged items
    (offload_commit-5.lua); reply_codes.OffloadCommit."""
    return run(
        conn,
        "offload_commit",
        (k.maintain_lease, k.offloading, k.segments, k.segment_queues, k.stats),
        (holder, number, count, source),
    )


class AbortReply(NamedTuple):
    moved: int  # or reply_codes.OffloadAbort when < 0
    left: int


def offload_abort(
    conn, k: keyspace.ProjectKeys, *, holder: str, source: str, source_key: str, most: int
) -> AbortReply:
    """Put up to MOST staged items back into SOURCE (its key SOURCE_KEY) (offload_abort-4.lua)."""
    reply = run(
        conn,
        "offload_abort",
        (k.maintain_lease, k.offloading, k.segment_queues, source_key),
        (holder, source, most),
    )
    return AbortReply(*reply)


def refill(
    conn,
    k: keyspace.ProjectKeys,
    *,
    holder: str,
    number: int,
    queue: str,
    queue_key: str,
    items: Sequence,
    below: int | None = None,
) -> int:
    """Put segment NUMBER's ITEMS back into QUEUE (its key QUEUE_KEY) and unregister it, while the
    queue holds fewer than BELOW items if given (refill-5.lua): how many, or a reply_codes.Refill
    code."""
    return run(
        conn,
        "refill",
        (k.maintain_lease, k.segments, k.segment_queues, queue_key, k.stats),
        (holder, number, queue, "" if below is None else below, *map(wire, items)),
    )


def refill_watch(conn, k: keyspace.ProjectKeys, *, holder: str, value: str) -> int:
    """Set K's REFILL_WATCH_FIELD to VALUE (BELOW x 16 + queue bits, offload.demand; '' clears
    it), the lease holder only (refill_watch-2.lua); reply_codes.RefillWatch."""
    return run(conn, "refill_watch", (k.maintain_lease, k.settings), (holder, value))


def segment_export(conn, k: keyspace.ProjectKeys, *, number: int, digest: str) -> int:
    """Unregister segment NUMBER, leaving an import ticket for DIGEST (segment_export-4.lua):
    the items it held, or reply_codes.SegmentExport.NOT_REGISTERED."""
    return run(
        conn, "segment_export", (k.segments, k.segment_queues, k.segment_exports, k.stats), (number, digest)
    )


def segment_import(conn, k: keyspace.ProjectKeys, *, number: int, count: int, digest: str) -> int:
    """Register an exported segment's file once as NUMBER (segment_import-5.lua); reply_codes.SegmentImport."""
    return run(
        conn,
        "segment_import",
        (k.settings, k.segments, k.segment_queues, k.segment_exports, k.stats),
        (number, count, digest),
    )


class LogArchiveReply(NamedTuple):
    code: int  # reply_codes.LogArchive
    trimmed: int


def log_archive(
    conn, k: keyspace.ProjectKeys, *, holder: str, number: int, first_id: str, last_id: str, entries: int
) -> LogArchiveReply:
    """Register log segment NUMBER (entries FIRST_ID..LAST_ID) and trim them (log_archive-4.lua)."""
    return LogArchiveReply(
        *run(
            conn,
            "log_archive",
            (k.maintain_lease, k.log, k.log_segments, k.stats),
            (holder, number, first_id, last_id, entries),
        )
    )


# -- statistics -----------------------------------------------------------------------------------


def sample_backlog(conn, k: keyspace.ProjectKeys, *, minute: int, backlog: int, ttl_s: int) -> int:
    """Store MINUTE's backlog sample unless it has one (sample_backlog-1.lua); reply_codes.SampleBacklog."""
    return run(conn, "sample_backlog", (k.minute(minute),), (backlog, ttl_s))


def rollup_hour(conn, k: keyspace.ProjectKeys, *, hour: int, ttl_s: int) -> int:
    """Sum HOUR's 60 minute hashes into its hour hash, once (rollup_hour-61.lua); reply_codes.RollupHour."""
    return run(conn, "rollup_hour", (k.hour(hour), *(k.minute(hour * 60 + i) for i in range(60))), (ttl_s,))


def rollup_day(conn, k: keyspace.ProjectKeys, *, day: int) -> int:
    """Sum DAY's 24 hour hashes into the project's days hash, once (rollup_day-25.lua);
    reply_codes.RollupDay."""
    return run(conn, "rollup_day", (k.days, *(k.hour(day * 24 + i) for i in range(24))), (day,))


def top_history(conn, k: keyspace.ProjectKeys, *, now_ms: int, top: int, tiers: Sequence) -> int:
    """Add a point of the TOP downloaders' item counts to each stream due (top_history-n.lua);
    TIERS: (interval_s, entries kept, expiry_s) per stream. Returns how many streams got one."""
    args = [now_ms, top]
    for interval_s, kept, expiry_s in tiers:
        args += [interval_s * 1000, kept, expiry_s * 1000]
    keys = (
        k.downloader_bytes,
        k.downloader_count,
        *(k.top_history(interval_s) for interval_s, _, _ in tiers),
    )
    return run(conn, "top_history", keys, args)


# -- the warrior HQ (global keys) -----------------------------------------------------------------


def register_warrior(
    conn,
    *,
    now_ms: int,
    warrior_id: str,
    record: str,
    address_key: str,
    forget_before_ms: int,
    max_warriors: int,
    max_registrations: int,
    window_ms: int,
    seen_ms: int,
) -> int:
    """Add a warrior to the registry within its bounds (register_warrior-3.lua); reply_codes.RegisterWarrior."""
    return run(
        conn,
        "register_warrior",
        (keyspace.WARRIORS, keyspace.WARRIORS_SEEN, keyspace.warrior_registrations(address_key)),
        (now_ms, warrior_id, record, forget_before_ms, max_warriors, max_registrations, window_ms, seen_ms),
    )


def warrior_seen(
    conn, *, now_ms: int, warrior_id: str, forget_before_ms: int, beat: str, max_record: int
) -> int:
    """Note a registered warrior's heartbeat BEAT (JSON) (warrior_seen-2.lua); reply_codes.WarriorSeen."""
    return run(
        conn,
        "warrior_seen",
        (keyspace.WARRIORS, keyspace.WARRIORS_SEEN),
        (now_ms, warrior_id, forget_before_ms, beat, max_record),
    )
