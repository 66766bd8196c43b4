"""The hot path's connection to the primary of a Sentinel service, found again after a failover.

Owns SentinelRedis: it asks the sentinels for the primary, resends a call that reached no Redis
(or that a demoted primary refused READONLY) to the new one, and frames its scripts with the
primary's ReplicaAcks (failover.py). topology.py's docstring tells the guarantees.
"""

from __future__ import annotations

import time

from tracker_core.infra.failover import (
    FAILOVER_WAIT_S,
    PROBE_TIMEOUT_S,
    PipelinedConnection,
    ReplicaAcks,
    error_text,
)
from tracker_core.infra.rawredis import ConnectionLost, OutcomeUnknown, RawRedis, RedisError
from tracker_core.infra.redis_urls import node_url

RETRY_PAUSE_S = 0.2  # between attempts on a Sentinel primary that could not be reached


class SentinelRedis(PipelinedConnection):
    """A RawRedis to the current primary of a Sentinel service, found again after a failover."""

    def __init__(self, url: str, spec: dict):
        self.url = url
        self.spec = spec
        self._primary: RawRedis | None = None
        self._acks = ReplicaAcks(spec)

    def _discover(self) -> RawRedis:
        errors = []
        for host, port in self.spec["sentinels"]:
            sentinel = RawRedis(node_url(host, port, None), timeout_s=PROBE_TIMEOUT_S)
            try:
                addr = sentinel.execute_command("SENTINEL", "get-master-addr-by-name", self.spec["service"])
            except RedisError as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            finally:
                sentinel.close()
            if not addr:
                errors.append(f"{host}:{port}: does not know {self.spec['service']!r}")
                continue
            primary = RawRedis(
                node_url(addr[0], int(addr[1]), self.spec["password"], self.spec["db"]),
                connect_timeout_s=PROBE_TIMEOUT_S,
            )
            try:
                role = primary.execute_command("ROLE")
            except RedisError as exc:
                errors.append(f"primary {addr[0]}:{addr[1]}: {exc}")
                primary.close()
                continue
            if role and role[0] == "master":
                self._acks.note_role(role)
                return primary
            primary.close()
            errors.append(f"{addr[0]}:{addr[1]} is not a primary yet")
        raise ConnectionLost(
            f"no primary for Sentinel service {self.spec['service']!r}: " + "; ".join(errors)
        )

    def pipeline(self, commands) -> list:
        """Run COMMANDS on the primary; on a failover find the new primary and run them there."""
        deadline = time.monotonic() + FAILOVER_WAIT_S
        while True:
            try:
                # Discovery first: it reads the new primary's replicas, which decides the WAIT.
                if self._primary is None:
                    self._primary = self._discover()
                framed, role, wait = self._acks.frame(commands)
                replies = self._primary.pipeline(framed)
                if not any((error_text(r) or "").startswith("READONLY") for r in replies):
                    break
                # The old primary was demoted: nothing was written; go find the new one.
                self.close()
            except ConnectionLost:
                # Nothing reached Redis (RawRedis raises OutcomeUnknown once anything was sent):
                # safe to send again, to whichever node is the primary by then.
                self.close()
            except OutcomeUnknown:
                self.close()  # the next call asks Sentinel again
                raise
            if time.monotonic() > deadline:
                raise ConnectionLost(
                    f"no writable primary for {self.spec['service']!r} after {FAILOVER_WAIT_S:.0f} s"
                )
            time.sleep(RETRY_PAUSE_S)
        replies, acknowledged = self._acks.unframe(replies, role, wait)
        self._acks.check(acknowledged)
        return replies

    def close(self) -> None:
        if self._primary is not None:
            self._primary.close()
            self._primary = None
        self._acks.checked_at = 0.0
