"""The tracker engine: queues, claims and limits kept in Redis, changed only by Lua scripts.

The packages, from the bottom up (each one's docstring says what it owns and may import;
tests/core/test_layers.py holds the code to it, with no circle between modules or folders):

- keyspace, errors, blocks: key names, the typed refusals, the blocks index (foundation);
- infra: Redis connections and topologies, the Redis clock, processes, durable files;
- compiled: the Cython hot path (classify, protocol, Bloom hashing) and its pure twins;
- scripts: one binding per Lua script of lua/, the only code that knows their arguments;
- project: a project's settings, limits, shards and links; access: tokens, secrets, audit;
- warriors: the warrior HQ; offload: segment files, their registry and leases;
- figures: the census, statistics and charts; items: the request hot path (claims, dones,
  intake, backfeed, the Bloom filter, item status);
- donelog: the done log and its archive; maintainer: `tracker maintain`'s passes;
- notify: webhooks (their hooks, events, outbox and delivery, run by `tracker maintain`);
- admin: every admin verb, the one layer the CLI, the admin API and the pages adapt.
"""
