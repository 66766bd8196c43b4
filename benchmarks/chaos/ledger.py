"""What the warriors were told, to check against the census: claims, acknowledged dones, twice.

An item handed to a second warrior while a first still holds it is a violation only when the
two claims ran certainly closer than the project's reclaim TTL: a claim ran somewhere between its
request being sent and its answer arriving, so the widest gap is (later answer - earlier send).
Wider gaps may be legitimate reclaims (the first holder went quiet) and are counted apart.

The tracker's clock is whole milliseconds, floored (`Engine._now_ms`), and a claim is due when
`now_ms >= claimed_ms + ttl_ms`: a reclaim right at the TTL can come up to 1 ms of real time
early, and the warriors' monotonic clock is not the workers' wall clock. So a gap within
CLOCK_SLACK_S below the TTL is a reclaim, not a violation (CI saw one at 4.9995-5.0 s).

A Redis kill may undo writes Redis acknowledged shortly before it. With appendfsync everysec,
Redis postpones writing its AOF buffer while a background fsync is still running (for up to
2 s) and answers clients meanwhile; a kill -9 then loses what the buffer held (docs/faults.md,
"The AOF window"). So a write acknowledged within LOSS_WINDOW_S before a kill may be gone:
a done (the item comes back when its claim is reclaimed), a claim (the item is back in its
queue, and the holder's later done is refused), a backfeed post (its items are gone). What
only such a loss explains is listed apart (``undone``), not as a violation; with appendfsync
always or no (Redis writes before it answers) the window is 0 and nothing is excused.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass


@dataclass
class Claim:
    holder: str
    sent: float
    received: float


CLOCK_SLACK_S = 0.002
# Redis gives up postponing after 2 s by its whole-second clock; the rest is the event loop's.
LOSS_WINDOW_S = 2.5


class Ledger:
    def __init__(self, reclaim_ttl_s: float, loss_window_s: float = 0.0, t0: float = 0.0):
        self.reclaim_ttl_s = reclaim_ttl_s
        self.loss_window_s = loss_window_s
        self.t0 = t0  # the run's start: violations say when they happened (at_s), beside the faults'
        self.lock = threading.Lock()
        self.holders: dict[str, Claim] = {}
        self.acked_done: dict[str, float] = {}  # item -> when its 200 OK arrived
        # items whose acknowledged done reported a claim a Redis kill may have undone since
        self.done_of_lost_claim: set[str] = set()
        self.kills: list[float] = []  # when Redis was killed (monotonic, the process gone)
        self.backfed_acked: list[tuple[float, list[str]]] = []  # (when answered 200, items)
        self.undone: list[dict] = []  # what only a write lost to a Redis kill explains
        self.loaded: set[str] = set()  # added by the admin, or backfed with a 200
        self.maybe: set[str] = set()  # backfed without an answer: in or not
        self.handed = 0
        self.reclaimed = 0
        self.twice: list[dict] = []
        self.after_done: list[dict] = []
        self.statuses: Counter = Counter()

    def count(self, route: str, status) -> None:
        with self.lock:
            self.statuses[f"{route} {status}"] += 1

    def redis_killed(self, at: float) -> None:
        with self.lock:
            self.kills.append(at)

    def _maybe_lost(self, acked_at: float) -> bool:
        """Whether a Redis kill since ACKED_AT may have undone a write acknowledged then."""
        return any(0 <= at - acked_at <= self.loss_window_s for at in self.kills)

    def handed_out(self, holder: str, items: list[str], sent: float, received: float) -> None:
        with self.lock:
            for item in items:
                self.handed += 1
                done_at = self.acked_done.get(item)
                if done_at is not None and sent > done_at:
                    seen = {
                        "item": item[:200],
                        "holder": holder,
                        "done_acked_s_before": round(sent - done_at, 3),
                        "at_s": round(sent - self.t0, 2),
                    }
                    if self._maybe_lost(done_at):
                        self.undone.append({**seen, "lost": "done"})
                    elif item in self.done_of_lost_claim:
                        self.undone.append({**seen, "lost": "claim, so the done was refused"})
                    else:
                        self.after_done.append(seen)
                prev = self.holders.get(item)
                if prev is not None:
                    widest = max(received - prev.sent, prev.received - sent)
                    if widest >= self.reclaim_ttl_s - CLOCK_SLACK_S:
                        self.reclaimed += 1
                    else:
                        seen = {
                            "item": item[:200],
                            "first": prev.holder,
                            "second": holder,
                            "widest_gap_s": round(widest, 3),
                            "at_s": round(sent - self.t0, 2),
                        }
                        if self._maybe_lost(prev.received):
                            self.undone.append({**seen, "lost": "first claim"})
                        else:
                            self.twice.append(seen)
                self.holders[item] = Claim(holder, sent, received)

    def giving_up(self, holder: str, items: list[str]) -> None:
        """Before a release is sent: from now on another warrior may get these at once."""
        with self.lock:
            for item in items:
                claim = self.holders.get(item)
                if claim is not None and claim.holder == holder:
                    del self.holders[item]

    def done_acked(self, holder: str, items: list[str], received: float) -> None:
        with self.lock:
            for item in items:
                self.acked_done.setdefault(item, received)
                claim = self.holders.get(item)
                if claim is not None and claim.holder == holder:
                    del self.holders[item]
                    if self._maybe_lost(claim.received):
                        self.done_of_lost_claim.add(item)

    def backfed(self, items: list[str], acked: bool, received: float = 0.0) -> None:
        with self.lock:
            if acked:
                self.backfed_acked.append((received, items))
                self.loaded.update(items)
                self.maybe.difference_update(items)
            else:
                self.maybe.update(i for i in items if i not in self.loaded)

    def backfed_maybe_lost(self) -> set[str]:
        """Items of backfeed posts acknowledged within the loss window before a Redis kill."""
        with self.lock:
            return {i for at, items in self.backfed_acked if self._maybe_lost(at) for i in items}
