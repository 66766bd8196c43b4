"""Pick the data layer from one URL: a single Redis, a Sentinel-managed primary, or a Redis Cluster.

The hot path keeps its raw hiredis connection (``RawRedis``) in all three:

- ``redis://`` and ``unix://``: one connection.
- ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB][?wait_replicas=N]``: asks
  the sentinels for the primary of SERVICE, and after a failover (connection lost, or the old
  primary answering READONLY) asks again and resumes. While the primary has replicas attached,
  every script call is followed in the same round trip by ``WAIT N`` (default N=1), so a state
  change is answered only once a replica holds it and a failover loses no acknowledged done; a
  change no replica acknowledged in time gets 503 and the client retries (done is idempotent).
  A primary with no replica attached (after a failover, before the old primary returns) keeps
  serving on its AOF alone: refusing every write then would stop the whole project.
  ``wait_replicas=0`` never waits.
- ``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...][?wait_replicas=N]``: routes each command
  to the node that owns its key's hash slot (every project key carries the hash tag ``{PROJECT}``,
  so a project's scripts run on one node) and follows MOVED and ASK redirections. When a primary
  fails (connection refused, an answer lost, CLUSTERDOWN, MOVED) it reads the slot map again from
  another node, the failed one last, and goes on with whichever node owns the slot by then: its
  replica once the cluster has promoted it. Until then a call to that slot gets ConnectionLost at
  once (503) rather than waiting: a worker serves every project, and a call waiting for one
  primary would hold up the projects on the others. Each primary is checked for attached replicas
  as under Sentinel, and a script sent to a primary that has one is followed by ``WAIT N`` in the
  same round trip, so a failover loses no acknowledged done either.

Commands are sent again (to a new primary, or to the slot's new owner) only when none of them
can have reached Redis (``ConnectionLost``, or a redirection: Redis checks the slot before it
runs anything); once they were sent, a broken connection or a timeout raises ``OutcomeUnknown``
(answered 503) and nothing is resent: a claim must not run twice. A Sentinel call waits at most
``FAILOVER_WAIT_S`` for a new primary, then raises ``ConnectionLost`` (503 too).

Admin paths get the matching redis-py client from ``admin_client``.

This module picks the connection; redis_urls.py parses the URLs, sentinel_redis.py and
cluster_redis.py are the two failover-aware connections, failover.py what they share.
"""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tracker_core.infra.cluster_redis import ClusterRedis
from tracker_core.infra.connection import ENCODING, ENCODING_ERRORS
from tracker_core.infra.rawredis import RawRedis
from tracker_core.infra.redis_urls import parse_topology_url
from tracker_core.infra.sentinel_redis import SentinelRedis


def connect(url: str):
    """The hot path's connection for URL: RawRedis, SentinelRedis or ClusterRedis."""
    spec = parse_topology_url(url)
    if spec["kind"] == "sentinel":
        return SentinelRedis(url, spec)
    if spec["kind"] == "cluster":
        return ClusterRedis(url, spec)
    return RawRedis(url)


def admin_client(url: str, **options):
    """The redis-py client for admin paths, of the same topology as ``connect(url)``.

    No retries of its own (redis-py 8 retries after a timeout by default): a change whose answer
    was lost must not be made twice; the caller reports the error (the admin API answers 503).
    A Cluster client keeps its own retries, which follow MOVED and ASK redirections.
    Replies are always decoded as tracker_core.infra.connection describes (one shape on every client).
    """
    spec = parse_topology_url(url)
    options.setdefault("decode_responses", True)
    options.setdefault("encoding", ENCODING)
    options.setdefault("encoding_errors", ENCODING_ERRORS)
    if spec["kind"] != "cluster":
        options.setdefault("retry", Retry(NoBackoff(), 0))
    if spec["kind"] == "sentinel":
        from redis.sentinel import Sentinel

        sentinel = Sentinel(spec["sentinels"], socket_timeout=10, password=None)
        return sentinel.master_for(
            spec["service"], db=spec["db"], password=spec["password"], socket_timeout=10, **options
        )
    if spec["kind"] == "cluster":
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in spec["nodes"]], password=spec["password"], **options
        )
    return redis.Redis.from_url(url, **options)
