"""`tracker maintain`: the passes that keep every project in shape on every node.

- maintenance: the Maintainer loop (leases, refill on demand, cleanup);
- steps: the named steps of a project's pass (statistics, the done log's archive, offloading
  and refilling, held items), ProjectPass and Watermarks;
- shard_passes: a sharded project's pass and its shards' shares of the limits.

May import: everything below the admin verbs: tracker_core.keyspace, tracker_core.infra,
tracker_core.scripts, tracker_core.project, tracker_core.offload, tracker_core.figures,
tracker_core.donelog.
"""
