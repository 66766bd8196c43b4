"""Infrastructure: how the tracker reaches Redis and runs processes, knowing nothing of projects.

- connection: the one connection interface of tracker_core and the shape of its replies;
- rawredis: the pipelined hiredis connection of the request hot path;
- topology: one URL to a single Redis, a Sentinel-managed primary or a Redis Cluster; its URLs
  (redis_urls), its failover-aware connections (sentinel_redis, cluster_redis) and what they
  share (failover: the waits and the replicas' acknowledgements);
- redis_clock: Redis's ``TIME`` as every node's clock;
- embedded: a private redis-server the tracker (or a test) starts and stops;
- processes: start, wait for and stop processes; supervision: keep children running;
- durable: files written whole or not at all.

May import: nothing of tracker_core outside this package.
"""
