"""Every admin verb, in one layer the faces (CLI, admin API, admin pages) only adapt.

A verb is ``module.verb(ctx, ...)``: ``ctx`` is an AdminContext (context.py: ``conn``, ``actor``,
``keys(project)``; ``AdminContext.from_url(url, actor="cli")``, ``ctx.as_actor(token_id)``).
It validates, acts, records its change in the audit log exactly once under ``ctx.actor`` (reads
record nothing), and returns plain JSON-able dicts and lists. It raises only the errors of
errors.py: BadInput (-> 400 / exit 1), NotFound (-> 404), Conflict (-> 409), all AdminError
(a ValueError) with a one-line message; Redis connection errors pass through as redis-py's.
Every verb that names a project raises BadInput for a malformed name and NotFound for an
unknown one ("BadInput, NotFound" below means at least those). Queue names are todo,
backfeed, secondary, redo or downloader:NAME. Limits of pages and names: checks.py (MAX_PAGE...);
the ``*_all`` verbs run every page through paging.every_page and record one entry (with
"stopped" and the total so far when a page is refused after others changed something).
On a sharded project (docs/sharding.md) every verb over items answers for all its shards, each
change one script call per shard; a paged verb goes shard after shard, and its cursor is then
"SHARD:CURSOR" text (paging.shard_page; a one-shard project's stays an int); 0 is the end.

The contract (``module.verb(ctx, args) -> returns; raises``; [audit action]):

projects.list_projects(ctx) -> ["name", ...] sorted; -
projects.create(ctx, project, settings=None) -> {"created"}; BadInput (name, setting), Conflict (exists) [project.create]
projects.show(ctx, project) -> {"project", "settings", "upload_targets", "blocked", "blocked_global"}; NotFound
projects.set_settings(ctx, project, values: {name: str}) -> {"settings_age"}; BadInput (none, unknown, bad value), NotFound, Conflict (damaged) [project.settings]
projects.pause(ctx, project) -> {"settings_age", "paused": True}; NotFound [project.pause]
projects.resume(ctx, project) -> {"settings_age", "paused": False}; NotFound [project.resume]
projects.delete(ctx, project) -> {"deleted"}; NotFound [project.delete]
projects.set_upload_target(ctx, project, url, state="active"|"inactive"|"remove") -> {"url", "state": "active"|"inactive"|"removed"}; BadInput, NotFound [upload_target]
items.add(ctx, project, names: iterable of str, queue="todo", batch=5000, progress=None) -> {"added", "duplicates"[, "refused_not_utf8"]}; BadInput (queue; a name too long or with NUL: checked up front for a list, as read for an iterator, then the message says how many went in before), NotFound [items.add; "stopped" when a bad name ended it after some were added]. progress(added, duplicates) runs after every batch; empty names are skipped; names that were not UTF-8 are refused one by one and counted.
items.count(ctx, project, queue) -> {"queue", "count"}; BadInput, NotFound
items.sample(ctx, project, queue, count=20) -> {"items": [...]} (at most MAX_SAMPLE); BadInput, NotFound
items.clear(ctx, project, queue) -> {"dropped"}; BadInput, NotFound [queue.clear]
items.move(ctx, project, source, target, pattern="*", cursor=0, limit=1000) -> {"moved", "cursor"} (one SSCAN page; 0: done); BadInput (same queue, pattern, cursor), NotFound [queue.move]
items.move_all(ctx, project, source, target, pattern="*") -> {"moved"} (every page); as move [queue.move, once]
items.redo(ctx, project, names=None, pattern=None, cursor=0, limit=1000, queue="redo", even_if_offloaded=False) -> {"requeued", "from_done", "from_seen", "held", "skipped", "skipped_by_reason": {...}[, "cursor" with pattern]}; BadInput (names xor pattern, 1 to MAX_PAGE names), NotFound, Conflict (limits kept changing) [items.redo]
items.redo_all(ctx, project, names=None, pattern=None, queue="redo", even_if_offloaded=False) -> as redo, no cursor (any number of names; every page of a pattern); as redo [items.redo, once; "stopped" when it failed after some went in]
items.status(ctx, project, names) -> [{"item", "status", "downloader", "queue", "limit", "claims", "reason", "since", "segment", "maybe"}, ...] (tracker_core.items.item_status: Redis only, the public answer); BadInput, NotFound
items.story(ctx, project, directory: Path, names, budget_s=None) -> [{"item", the status fields, "ip", "rounds", "limit_rule", "done", "seen", "unread"}, ...] (tracker_core.admin.item_story: segment files and the done log searched, 1 to 100 names); BadInput, NotFound
census.status(ctx, project) -> {"project", "queues": {..., "downloader": {owner: n}, "limited"}, "todo_total", "out", "dead", "offloaded", "offloaded_queues", "segments", "done", "done_kept", "done_offloaded", "counters"}; NotFound
claims.list_claims(ctx, project, cursor=0, count=100, pattern="*") -> {"claims": [{"item", "downloader", "ip", "times_claimed", "claimed_at_ms"}], "cursor"}; BadInput, NotFound
claims.release(ctx, project, downloader=None, older_than_s=None, pattern=None, cursor=0, limit=1000) -> {"released", "cursor"} (one page; exactly one filter); BadInput, NotFound [claims.release]
claims.release_all(ctx, project, downloader=None, older_than_s=None, pattern=None) -> {"released"} (every page); as release [claims.release, once]
limits.list_limits(ctx, project) -> [{"name", "pattern", "rate", "rate_per_s", "seq"}] in classification order; NotFound
limits.add(ctx, project, name, pattern, rate, reclassify=True) -> {"limit", "settings_age"}; BadInput (name, pattern, rate, too many), NotFound [limit.add]
limits.remove(ctx, project, name) -> {"removed", "settings_age"}; BadInput, NotFound (project or limit) [limit.remove]
limits.reclassify(ctx, project) -> {"held"}; NotFound [limit.reclassify]
limits.block(ctx, entry, project=None, remove=False) -> {"entry" (as stored), "blocked": not remove}; BadInput, NotFound, Conflict (kept changing) [block.add | block.remove]
limits.blocks(ctx, project=None) -> {"global": [...]} or {"project", "blocked", "blocked_global", "ignore_global_blocked"}; NotFound
limits.reindex_blocks(ctx) -> {"projects"}; Conflict [block.reindex]
limits.reindex_blocks_if_missing(ctx) -> {"projects"}; Conflict [block.reindex, only when projects > 0]
dead.list_dead(ctx, project, cursor=0, count=100) -> {"dead": [{"item", ...its history}], "cursor"}; BadInput, NotFound
dead.requeue(ctx, project, names, queue="todo") -> {"requeued"} (1 to MAX_PAGE names); BadInput, NotFound [dead.requeue]
dead.requeue_page(ctx, project, cursor=0, limit=1000, queue="todo") -> {"requeued", "cursor"}; BadInput, NotFound [dead.requeue]
dead.requeue_all(ctx, project, queue="todo") -> {"requeued"} (every page); BadInput, NotFound [dead.requeue, once]
backfeed.create_secret(ctx, project) -> {"id", "secret", "path"} (the secret shown once); NotFound [backfeed_secret.create, id only]
backfeed.list_secrets(ctx, project) -> [{"id", "created"}]; NotFound
backfeed.revoke_secret(ctx, project, secret_id) -> {"revoked": id}; BadInput (malformed, ambiguous), NotFound [backfeed_secret.revoke]
backfeed.shard_map(ctx, project, cursor=0, count=1000) -> {"map": {shard: queue}, "items": {shard: n}, "cursor"}; BadInput, NotFound
backfeed.map_shard(ctx, project, shard, queue) -> {"shard", "queue"}; BadInput, NotFound [backfeed_shard.map]
backfeed.unmap_shard(ctx, project, shard) -> {"shard", "queue": "backfeed"}; BadInput, NotFound (project, or shard not mapped) [backfeed_shard.unmap]
backfeed.bloom_filter(ctx, project, capacity=None, fp_rate=None, kind=None) -> {"kind", "capacity", "fp_rate", "layers": [...], "items", "bits_per_item_at_capacity"} (+ "shards": N, each figure added over them); BadInput (capacity past 1e9, a first layer past 4 GiB), NotFound, Conflict (geometry given but the filter holds items) [backfeed.filter, only when a geometry is given]
segments.list_segments(ctx, project) -> {"segments": {"N" or "SHARD:N": {"items", "source"}}, "offloading"}; NotFound
segments.export_file(ctx, project, directory: Path, number (int, or "SHARD:N" on a sharded project), destination: Path) -> {"segment", "items", "destination"}; BadInput, NotFound (project, segment) [segments.export]
segments.import_file(ctx, project, directory: Path, source: Path, queue="todo") -> {"segment" (None: through the filter), "items", "duplicates"[, "refused_not_utf8"]}; BadInput, NotFound [segments.import]
tokens.create(ctx, scope="*", note="", read_only=False, expires=None) -> {"token" (shown once), "token_id", "scope", "read_only", "expires_ms"}; BadInput (scope: '*' or 1 to 20 project names; expires: 30d, 12h, 90m, 60s or an ISO date, at most 3650 days) [token.create, with scope, read_only, expires_ms, note]
tokens.list_tokens(ctx) -> {"tokens": [{"token_id", "scope", "note", "created_ms", "read_only", "expires_ms", "last_used_ms"}]}; -
tokens.revoke(ctx, token_id) -> {"revoked": token_id}; BadInput (malformed id), NotFound [token.revoke]
webhooks.add(ctx, url, project=None, events=None) -> {"hook_id", "url", "project", "events", "created_ms", "secret" (shown once)}; BadInput (url, events, 100 hooks), NotFound [webhook.add: id, host, events]
webhooks.list_hooks(ctx, project=None) -> {"webhooks": [{..., "delivered", "failures", "dropped", "last_status", "last_ms"}], "outbox" (without PROJECT)}; NotFound
webhooks.remove(ctx, hook_id, project=None) -> {"removed": id}; BadInput (malformed id), NotFound (none, or not PROJECT's) [webhook.remove]
hq.set_fields(ctx, values: {field: str}) -> {"hq": values}; BadInput [hq.set]
hq.show_fields(ctx) -> {"hq": {field: value}} (defaults for unset fields; the front-page banner too)
hq.warriors(ctx, offset=0, count=100) -> {"warriors": [...], "online", ...} (tracker_core.warriors.hq.registry); BadInput
log.audit_page(ctx, project=None, count=100, before=None) -> {"entries": [...], "next"} newest first; BadInput (project name, before); a deleted project's log stays readable
log.done_page(ctx, project, directory, kind="done", since=None, downloader=None, cursor=None, limit=100, item=None) -> tracker_core.donelog.log_reader.page's answer; BadInput, NotFound; log_archive.LogUnreadable passes through (503: this node cannot read the segment files)
log.export(ctx, project, directory, out: binary stream, kind="done", since=None, downloader=None, item=None) -> None (JSON lines to out); BadInput, NotFound; LogUnreadable passes through
log.status(ctx, project) -> tracker_core.donelog.log_archive.status's answer; NotFound

May import: every package of tracker_core (the verbs are its top layer; nothing in it imports them).
"""
