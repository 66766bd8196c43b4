"""The fault suite (`make chaos`): real Redis and `tracker serve`, concurrent warriors, hard faults.

``run(Config(...))`` starts a redis-server (AOF on, a maxmemory under noeviction) and the real
`tracker serve` on loopback, loads URL-named items, drives the server with warrior threads over
HTTP while it kills workers, the server's parent and Redis, stalls Redis past the client timeout
and fills it to maxmemory; then it drains the project and checks the invariant with a census of
every place an item can be (census.py). With ``Config(cluster=True)`` (``--cluster``) it runs on a
Redis Cluster of 3 primaries, each with a replica, and kills the project's primary instead of the
single Redis's faults (``primary_failover``: its replica takes over). The report (JSON-ready dict) has requests by status,
recovery time after each fault, items handed out twice and every violation found.

Modules: procs (the processes and their faults), census (where every item is), ledger (what the
warriors were told), warriors (the HTTP clients), run (the schedule and the report).
"""

from chaos.run import Config, run  # noqa: F401
