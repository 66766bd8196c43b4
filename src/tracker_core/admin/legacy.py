"""Admin operations over redis-py: projects, settings, items, blocks, upload targets, status.

The CLI and (later) the admin API both call these; every change is one script or one atomic
command, like the hot path.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

import redis

from tracker_core import blocks as blocks_mod
from tracker_core import bloom, census, intake, scripts
from tracker_core import keys as keyspace
from tracker_core import limits as limits_mod
from tracker_core import settings as settings_mod
from tracker_core.admin.context import AdminContext, connect
from tracker_core.admin.errors import AdminError

ADD_BATCH = intake.ADD_BATCH
NOT_UTF8 = intake.NOT_UTF8
valid_utf8 = intake.valid_utf8
# Redo (re-queue done or seen items on purpose): the queue it fills unless told otherwise (served
# after todo, backfeed and secondary), names per script call (one call blocks Redis while it
# runs), and what the script answers, in its order, then what the caller adds.
REDO_QUEUE = "redo"
REDO_BATCH = 1000
REDO_FIELDS = (
    "from_done",
    "from_seen",
    "held",
    "out",
    "queued",
    "dead",
    "offloaded",
    "not_seen",
    "maybe_offloaded",
)
REDO_SKIP_FIELDS = ("out", "queued", "dead", "offloaded", "not_seen", "maybe_offloaded", "not_utf8")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Admin:
    def __init__(self, client: redis.Redis):
        self.r = client

    @classmethod
    def from_url(cls, url: str) -> Admin:
        return cls(connect(url))

    def _keys(self, project: str, must_exist: bool = True) -> keyspace.ProjectKeys:
        return AdminContext(self.r, None).keys(project, must_exist)

    # -- projects -------------------------------------------------------------------------------

    def create_project(self, project: str, **values: str) -> bool:
        """Create PROJECT with default settings (overridden by VALUES); False if it exists."""
        k = self._keys(project, must_exist=False)
        initial = settings_mod.defaults()
        for name, value in values.items():
            initial[name] = settings_mod.validate(name, value)
        flat = [x for pair in initial.items() for x in pair]
        created = scripts.run(
            self.r, "create_project", (k.settings, k.blocked), (_now_ms(), *flat, "--blocked")
        )
        self.r.sadd(keyspace.PROJECTS, project)
        if created:
            # After joining PROJECTS: a global block made meanwhile either is read here or
            # finds this project in its loop over PROJECTS.
            self._write_blocks(k, lambda own, copy: (own, set(self.r.smembers(keyspace.GLOBAL_BLOCKED))))
        return bool(created)

    def projects(self) -> list[str]:
        return sorted(self.r.smembers(keyspace.PROJECTS))

    def set_settings(self, project: str, values: dict[str, str]) -> int:
        """Validate and store VALUES in one step; return the new settings age."""
        k = self._keys(project)
        flat = []
        for name, value in values.items():
            flat += [name, settings_mod.validate(name, value)]
        age = scripts.run(self.r, "set_settings", (k.settings,), (project, keyspace.SETTINGS_CHANNEL, *flat))
        if age == -1:
            raise AdminError(f"unknown project {project!r}")
        if age < 0:
            raise AdminError(f"the settings of {project!r} are damaged (settings_age is not a number)")
        return age

    def show_project(self, project: str) -> dict:
        k = self._keys(project)
        values = settings_mod.defaults()
        values.update(self.r.hgetall(k.settings))
        return {
            "project": project,
            "settings": values,
            "upload_targets": self.r.hgetall(k.upload_targets),
            "blocked": sorted(self.r.smembers(k.blocked)),
            "blocked_global": sorted(self.r.smembers(k.blocked_global)),
        }

    def set_upload_target(self, project: str, url: str, state: str) -> int:
        """Mark URL 'active' or 'inactive', or remove it (state ''); bumps the settings age."""
        k = self._keys(project)
        if state and not settings_mod.valid_upload_target(url):
            raise AdminError(f"bad upload target {url!r}: must match ^rsync://.+/$ or ^https?://.+/$")
        if state not in ("active", "inactive", ""):
            raise AdminError("state must be active, inactive or empty")
        if state:
            self.r.hset(k.upload_targets, url, state)
        else:
            self.r.hdel(k.upload_targets, url)
        return self.set_settings(project, {})

    # -- blocks -----------------------------------------------------------------------------------

    def block(self, entry: str, project: str | None = None, remove: bool = False) -> str:
        """Block (or unblock) an IP, a CIDR range or a downloader name in one project, or in all
        of them; return the entry as stored (tracker_core.blocks.normalise).

        Global blocks are copied into every project's ``blocked_global`` (the claim script reads
        only keys in the project's slot, for Redis Cluster), apart from the project's own
        ``blocked``: a project block and a global block of the same entry are lifted apart.
        """
        try:
            entry = blocks_mod.normalise(entry)
        except blocks_mod.BadEntry as exc:
            raise AdminError(str(exc)) from None

        def change(entries: set[str]) -> set[str]:
            return entries - {entry} if remove else entries | {entry}

        if project is not None:
            if not self._write_blocks(self._keys(project), lambda own, copy: (change(own), copy)):
                raise AdminError(f"unknown project {project!r}")
            return entry
        (self.r.srem if remove else self.r.sadd)(keyspace.GLOBAL_BLOCKED, entry)
        for name in self.projects():
            self._write_blocks(keyspace.ProjectKeys(name), lambda own, copy: (own, change(copy)))
        return entry

    def blocks(self, project: str | None = None) -> dict:
        """The global entries, or PROJECT's own and its copy of the global ones."""
        if project is None:
            return {"global": sorted(self.r.smembers(keyspace.GLOBAL_BLOCKED))}
        k = self._keys(project)
        ignore = self.r.hget(k.settings, "ignore_global_blocked") == "1"
        return {
            "project": project,
            "blocked": sorted(self.r.smembers(k.blocked)),
            "blocked_global": sorted(self.r.smembers(k.blocked_global)),
            "ignore_global_blocked": ignore,
        }

    def reindex_blocks(self) -> int:
        """Rebuild every project's block index, its global copy from the global list (entries of
        the project's own set that are global are taken as copies, as a tracker before the
        split kept them); the number of projects done. For upgrades and repairs."""
        done = 0
        for name in self.projects():
            glob = set(self.r.smembers(keyspace.GLOBAL_BLOCKED))
            done += self._write_blocks(
                keyspace.ProjectKeys(name), lambda own, copy, glob=glob: (own - glob, glob)
            )
        return done

    def reindex_blocks_if_missing(self) -> int:
        """Build the block index of projects that have blocks but no index (a Redis from before
        the index: its blocks would not be enforced); the number of projects done."""
        glob = set(self.r.smembers(keyspace.GLOBAL_BLOCKED))
        done = 0
        for name in self.projects():
            k = keyspace.ProjectKeys(name)
            has_blocks = glob or self.r.scard(k.blocked) or self.r.scard(k.blocked_global)
            if has_blocks and not self.r.exists(k.blocked_index):
                done += self._write_blocks(k, lambda own, copy: (own - glob, glob))
        return done

    def _write_blocks(self, k: keyspace.ProjectKeys, change) -> bool:
        """Apply CHANGE(own, global copy) -> (own, global copy) to K's blocks and rebuild the
        index, in one script that first checks nobody changed them since the read; False for a
        project that does not exist (any more)."""
        for _ in range(50):
            own, copy = (
                set(x)
                for x in self.r.pipeline(transaction=False)
                .smembers(k.blocked)
                .smembers(k.blocked_global)
                .execute()
            )
            new_own, new_copy = change(own, copy)
            index = blocks_mod.index_members(new_own, new_copy)
            done = scripts.run(
                self.r,
                "set_blocks",
                (k.settings, k.blocked, k.blocked_global, k.blocked_index),
                (len(own), len(copy), len(new_own), len(new_copy), *own, *copy, *new_own, *new_copy, *index),
            )
            if done != 0:
                return done == 1
        raise AdminError(f"the blocks of {k.project!r} kept changing: try again")

    # -- items ------------------------------------------------------------------------------------

    def add_items(
        self,
        project: str,
        names: Iterable[str],
        queue: str = "todo",
        batch: int = ADD_BATCH,
        refused: dict | None = None,
    ) -> Iterator[tuple[int, int]]:
        """Queue NAMES in batches (tracker_core.intake.add); yield (added, duplicates) per batch."""
        return intake.add(self.r, self._keys(project), names, queue, batch, refused)

    def status(self, project: str) -> dict:
        """Where every item is (tracker_core.census.project_status), JSON-ready."""
        return census.project_status(census.redis_py_runner(self.r), self._keys(project))

    # -- pattern and item-type limits (tracker_core.limits) -------------------------------------

    def add_limit(self, project: str, name: str, pattern: str, rate: str, reclassify: bool = True) -> int:
        """Add or replace a limit; return the new settings age (every node reloads).

        With RECLASSIFY, queued items the limit now matches move to its sub-queue (a scan of
        the shared queues: pass False when adding many limits, then call reclassify once).
        """
        k = self._keys(project)
        try:
            age = limits_mod.add(self.r, k, name, pattern, rate)
        except limits_mod.LimitError as exc:
            raise AdminError(str(exc)) from None
        if reclassify:
            limits_mod.reclassify(self.r, k)
        return age

    def reclassify(self, project: str) -> int:
        """Hold the queued items that the current limits match; return how many moved."""
        return limits_mod.reclassify(self.r, self._keys(project))

    def remove_limit(self, project: str, name: str) -> int:
        """Remove a limit; return the new settings age."""
        try:
            return limits_mod.remove(self.r, self._keys(project), name)
        except limits_mod.LimitError as exc:
            raise AdminError(str(exc)) from None

    def requeue_dead(self, project: str, names: list[str], queue: str = "todo") -> int:
        """Put dead items back into QUEUE; return how many were dead.

        Into a shared queue, items a limit matches are held in its sub-queue instead (like
        added ones); a downloader's own queue takes them all.
        """
        k = self._keys(project)
        try:
            target, owner = k.queue_and_owner(queue)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
        compiled = None if owner else limits_mod.CompiledLimits(limits_mod.load(self.r, k))
        moved = held = 0
        for start in range(0, len(names), ADD_BATCH):
            part = names[start : start + ADD_BATCH]
            entries = limits_mod.held_entries(compiled, part)
            n = scripts.run(
                self.r,
                "requeue_dead",
                (k.dead, target, k.stats, k.limited_in, k.downloader_queues),
                (owner, *[limits_mod.wire(x) for pair in zip(part, entries) for x in pair]),
            )
            if n < 0:
                raise AdminError("requeue_dead: bad arguments (nothing changed)")
            moved += n
            held += n > 0 and any(entries)
        if held:
            limits_mod.hold_new(self.r, k)
        return moved

    def seen_by_filter(self, k: keyspace.ProjectKeys, names: list[str]) -> list[bool]:
        """Whether the project's Bloom filter has (probably) seen each name; reads only.

        A project whose filter was never configured has seen nothing (and is not configured
        here: a read must not write).
        """
        fields = self.r.hgetall(k.bloom)
        if not fields or not names:
            return [False] * len(names)
        plan = bloom.Plan(k, bloom.Geometry.from_redis(fields))
        args = bloom.script_args([b""] * len(names), [limits_mod.wire(n) for n in names], plan.hash_plan)
        pipe = self.r.pipeline(transaction=False)
        i = 0
        for _ in names:
            i += 1  # the (empty) entry
            for k_bits in plan.ks:
                chunk_key = plan.chunk_keys[args[i] - bloom.FIXED_KEYS - 1]
                ops = []
                for position in args[i + 1 : i + 1 + k_bits]:
                    ops += ("GET", "u1", position)
                pipe.execute_command("BITFIELD_RO", chunk_key, *ops)
                i += 1 + k_bits
        replies = pipe.execute()
        layers = len(plan.ks)
        return [any(all(replies[n * layers + layer]) for layer in range(layers)) for n in range(len(names))]

    def redo_items(
        self, project: str, names: list[str], queue: str = REDO_QUEUE, even_if_offloaded: bool = False
    ) -> dict:
        """Re-queue NAMES on purpose: done items, and items the filter has seen that are nowhere.

        The only way into a queue that bypasses the Bloom filter (see redo_items-n.lua for what
        happens to each name). Names that are not UTF-8 are left where they are (not_utf8): a
        warrior could claim one but never report it. Items a limit matches are held, as for
        every give-back. Returns counts: requeued (from_done + from_seen, held included) and
        skipped by reason. Not audited here: the API and the CLI audit once per call.
        """
        k = self._keys(project)
        try:
            target, owner = k.queue_and_owner(queue)
        except ValueError as exc:
            raise AdminError(str(exc)) from None
        totals = dict.fromkeys(REDO_FIELDS, 0)
        good = [n for n in names if valid_utf8(n)]
        totals["not_utf8"] = len(names) - len(good)
        held_any = False
        for start in range(0, len(good), REDO_BATCH):
            part = good[start : start + REDO_BATCH]
            in_done = self.r.smismember(k.done, [limits_mod.wire(n) for n in part])
            maybe = [n for n, done in zip(part, in_done) if not done]
            # A done name came in through the filter; ask it only about the others. (Should a
            # done name leave `done` for a segment before the script runs, it is then a seen
            # name found nowhere: skipped as maybe_offloaded, never queued twice.)
            seen = dict.fromkeys(part, True)
            seen.update(zip(maybe, self.seen_by_filter(k, maybe)))
            reply = self._redo_batch(k, target, owner, part, seen, even_if_offloaded)
            for field, value in zip(REDO_FIELDS, reply[2:]):
                totals[field] += int(value)
            held_any = held_any or int(reply[4]) > 0
        if held_any:
            limits_mod.hold_new(self.r, k)
        requeued = totals["from_done"] + totals["from_seen"]
        skipped = {f: totals[f] for f in REDO_SKIP_FIELDS}
        return {
            "requeued": requeued,
            "from_done": totals["from_done"],
            "from_seen": totals["from_seen"],
            "held": totals["held"],
            "skipped": sum(skipped.values()),
            "skipped_by_reason": skipped,
        }

    def _redo_batch(
        self,
        k: keyspace.ProjectKeys,
        target: str,
        owner: str,
        names: list[str],
        seen: dict,
        even_if_offloaded: bool,
    ) -> list:
        """One redo_items script call; retried when the limits or downloader queues moved."""
        for attempt in range(4):
            # Classified at the settings age the script checks (like release); the last
            # attempt does not check, so a stream of limit changes cannot stop a redo.
            age, compiled = limits_mod.current(self.r, k)
            entries = limits_mod.held_entries(compiled, names) if not owner else [""] * len(names)
            owners = sorted(self.r.smembers(k.downloader_queues))
            args = [
                age if attempt < 3 else "",
                owner,
                "1" if even_if_offloaded else "0",
                len(owners),
                *owners,
            ]
            for name, entry in zip(names, entries):
                args += [limits_mod.wire(name), limits_mod.wire(entry), "1" if seen.get(name) else "0"]
            reply = scripts.run(
                self.r,
                "redo_items",
                (
                    k.settings,
                    k.done,
                    k.out,
                    k.claims,
                    k.dead,
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
                    k.stats,
                    target,
                    k.downloader_queues,
                    *[k.downloader_queue(o) for o in owners],
                ),
                args,
            )
            if reply[0] == 200:
                return reply
            if reply[0] == -1:
                raise AdminError(f"unknown project {k.project!r}")
            if reply[0] == -4:
                raise AdminError("redo_items: bad arguments (nothing changed)")
        raise AdminError("the project's limits or downloader queues kept changing; try again")

    def limits(self, project: str) -> list[dict]:
        """List a project's limits in classification order."""
        return [limit.as_dict() for limit in limits_mod.load(self.r, self._keys(project))]
