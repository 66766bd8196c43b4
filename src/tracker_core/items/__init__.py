"""Items on their way: claims, dones, releases, intake, backfeed, the Bloom filter, item status.

- engine: the request hot path (claim, done, release, upload, status), one script per call;
- shard_router: a sharded project's warrior calls spread over its shards;
- intake: the one way new items come in; backfeed: the hot path of discovered items;
- giveback: the one way items the project had go back into a queue;
- bloom: a project's Bloom filter in Redis, over bloom_geometry (its layers), bloom_plan (a
  call's keys and hashing) and bloom_membership (the read-only test);
- claim_records, item_status, uniques_seen.

May import: tracker_core.keyspace, tracker_core.errors, tracker_core.infra,
tracker_core.compiled, tracker_core.scripts, tracker_core.project, tracker_core.access,
tracker_core.figures (the census the engine's counts read).
"""
