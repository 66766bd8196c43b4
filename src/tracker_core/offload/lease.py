"""The maintain lease: one maintainer at a time moves a project's segments.

`{P}:maintain_lease` holds the holder's name with a TTL. Every script that stages, commits,
aborts or refills checks the holder in the same atomic step, so a maintainer whose lease ran out
(a long pass, a pause) can change nothing: its next step is refused with NOT_HOLDER, which
`Lease.checked` turns into LeaseLost. The same lease guards the done log's archive
(tracker_core.donelog.log_archive).

A backup (tracker_core.backup) sets keyspace.BACKUP_HOLD to its own holder name, then takes
every lease: any other Lease gives its lease up at its next take (a pass's start, or a renewal
between steps) and takes none while the hold stands, so running passes end within one lease
period and none starts until the backup is over. The hold only hurries them: what keeps the
files in step with Redis is the lease, checked by every script that moves segments.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from tracker_core import keyspace, scripts
from tracker_core.offload.segment_registry import OffloadError

LEASE_MS = 30_000
# Every script that checks the lease (offload_stage, offload_commit, offload_abort, refill)
# refuses a maintainer without it with this one code; tests/core/offload/test_offload.py checks it.
NOT_HOLDER = scripts.offload_stage.codes.NOT_HOLDER


class LeaseLost(RuntimeError):
    """Another maintainer holds the project's lease now: stop this project's pass."""


def default_holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """One maintainer's hold on one project's lease; renewed between the steps of a pass."""

    def __init__(self, client, k: keyspace.ProjectKeys, holder: str | None = None, lease_ms: int = LEASE_MS):
        self.client = client
        self.k = k
        self.key = k.maintain_lease
        self.holder = holder or default_holder()
        self.lease_ms = lease_ms
        self.renewed_at = -float("inf")

    def take(self) -> bool:
        """Take or renew the lease; False when another maintainer holds it, or when a backup
        holds every lease (the lease is then given up, for the backup to take)."""
        if self.held_back():
            self.release()
            return False
        reply = scripts.maintain_lease(self.client, self.k, holder=self.holder, lease_ms=self.lease_ms)
        if reply != scripts.maintain_lease.codes.HELD:
            return False
        self.renewed_at = time.monotonic()
        return True

    def keep(self) -> None:
        """Renew once a third of the lease has passed; raise LeaseLost when someone else has it."""
        if (time.monotonic() - self.renewed_at) * 1000 >= self.lease_ms / 3 and not self.take():
            raise LeaseLost(f"another maintainer holds {self.key}")

    def held_back(self) -> bool:
        """Whether a backup other than this holder stands (keyspace.BACKUP_HOLD)."""
        hold = self.client.get(keyspace.BACKUP_HOLD)
        if isinstance(hold, bytes):
            hold = hold.decode("utf-8", "surrogateescape")
        return hold is not None and hold != self.holder

    def release(self) -> None:
        scripts.maintain_lease(self.client, self.k, holder=self.holder, lease_ms=self.lease_ms, release=True)
        self.renewed_at = -float("inf")

    def checked(self, reply):
        """REPLY of a lease-checking script; LeaseLost when it refused for want of the lease."""
        code = reply[0] if isinstance(reply, (tuple, list)) else reply
        if code == NOT_HOLDER:
            raise LeaseLost(f"another maintainer holds {self.key}")
        return reply


def held_or_taken(client, k: keyspace.ProjectKeys, lease: Lease | None) -> Lease:
    """LEASE, or a new one held for this call (OffloadError when another maintainer has it)."""
    if lease is None:
        lease = Lease(client, k)
        if not lease.take():
            raise OffloadError(f"another maintainer holds the lease of {k.project}")
    return lease
