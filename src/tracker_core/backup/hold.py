"""The backup hold and every offload lease, held by one backup and renewed until released."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from tracker_core import keyspace
from tracker_core.offload.lease import LEASE_MS, Lease, default_holder

HOLD_MS = 120_000  # the hold and the backup's leases outlive a stalled backup by at most this
RENEW_EVERY_S = 10.0
# A maintainer gives its lease up at its next take; one busy in a step takes it at the latest
# when a third of its lease has passed (Lease.keep), and a dead one's lease expires: one lease
# period and a margin bound the wait.
WAIT_S = LEASE_MS / 1000 + 10


class BackupError(RuntimeError):
    """A backup or restore that cannot go on; the message is one line."""


class BackupHold:
    """Hold keyspace.BACKUP_HOLD and the lease of every shard given to take(), renewed in a
    thread; release() gives everything up. check() raises once a renewal failed."""

    def __init__(self, client, holder: str | None = None, hold_ms: int = HOLD_MS, wait_s: float = WAIT_S):
        self.client = client
        self.holder = holder or "backup:" + default_holder()
        self.hold_ms = hold_ms
        self.wait_s = wait_s
        self.leases: dict[str, Lease] = {}  # tag -> lease
        self.lost: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> BackupHold:
        if not self.client.set(keyspace.BACKUP_HOLD, self.holder, nx=True, px=self.hold_ms):
            other = self.client.get(keyspace.BACKUP_HOLD)
            raise BackupError(f"another backup is running ({other}); wait for it to end")
        self._thread = threading.Thread(target=self._renew, name="backup-hold", daemon=True)
        self._thread.start()
        return self

    def take(self, shards: Iterable[keyspace.ProjectKeys]) -> list[str]:
        """Take the lease of every shard (keys) not held yet, waiting up to wait_s for the
        maintainers' passes to end; the tags newly taken. BackupError names one still held."""
        wanted = [k for k in shards if k.tag not in self.leases]
        deadline = time.monotonic() + self.wait_s
        taken = []
        while wanted:
            for k in list(wanted):
                lease = Lease(self.client, k, self.holder, self.hold_ms)
                if lease.take():
                    with self._lock:
                        self.leases[k.tag] = lease
                    taken.append(k.tag)
                    wanted.remove(k)
            if wanted and time.monotonic() > deadline:
                holder = self.client.get(wanted[0].maintain_lease)
                raise BackupError(
                    f"the offload lease of {wanted[0].project} ({wanted[0].tag}) is still held by "
                    f"{holder} after {self.wait_s:g}s"
                )
            if wanted:
                time.sleep(0.05)
        return taken

    def check(self) -> None:
        """BackupError unless every lease taken is still this backup's (read from Redis)."""
        if self.lost:
            raise BackupError(self.lost)
        with self._lock:
            leases = list(self.leases.values())
        for lease in leases:
            if self.client.get(lease.key) != self.holder:
                raise BackupError(
                    f"the offload lease of {lease.k.tag} was lost during the backup: run it again"
                )

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            try:
                if self.client.get(keyspace.BACKUP_HOLD) != self.holder:
                    self.lost = "the backup hold expired (the backup stalled): run it again"
                    return
                self.client.pexpire(keyspace.BACKUP_HOLD, self.hold_ms)
                with self._lock:
                    leases = list(self.leases.values())
                for lease in leases:
                    if not lease.take():
                        self.lost = f"the offload lease of {lease.k.tag} was lost: run the backup again"
                        return
            except Exception as exc:  # noqa: BLE001 - reported by check(), the backup stops
                self.lost = f"renewing the backup's leases failed: {exc}".splitlines()[0]
                return

    def release(self) -> None:
        """Give up every lease and the hold (best effort: both expire anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for lease in self.leases.values():
            try:
                lease.release()
            except Exception:  # noqa: BLE001 - Redis may be gone; the lease expires
                pass
        try:
            if self.client.get(keyspace.BACKUP_HOLD) == self.holder:
                self.client.delete(keyspace.BACKUP_HOLD)
        except Exception:  # noqa: BLE001 - the hold expires
            pass
