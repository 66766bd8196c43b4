"""What the warriors were told, to check against the census: claims, acknowledged dones, twice.

An item handed to a second warrior while a first still holds it is a violation only when the
two claims ran certainly closer than the project's reclaim TTL: a claim ran somewhere between its
request being sent and its answer arriving, so the widest gap is (later answer - earlier send).
Wider gaps may be legitimate reclaims (the first holder went quiet) and are counted apart.

The tracker's clock is whole milliseconds, floored (`Engine._now_ms`), and a claim is due when
`now_ms >= claimed_ms + ttl_ms`: a reclaim right at the TTL can come up to 1 ms of real time
early, and the warriors' monotonic clock is not the workers' wall clock. So a gap within
CLOCK_SLACK_S below the TTL is a reclaim, not a violation (CI saw one at 4.9995-5.0 s).
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


class Ledger:
    def __init__(self, reclaim_ttl_s: float):
        self.reclaim_ttl_s = reclaim_ttl_s
        self.lock = threading.Lock()
        self.holders: dict[str, Claim] = {}
        self.acked_done: dict[str, float] = {}  # item -> when its 200 OK arrived
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

    def handed_out(self, holder: str, items: list[str], sent: float, received: float) -> None:
        with self.lock:
            for item in items:
                self.handed += 1
                done_at = self.acked_done.get(item)
                if done_at is not None and sent > done_at:
                    self.after_done.append(
                        {
                            "item": item[:200],
                            "holder": holder,
                            "done_acked_s_before": round(sent - done_at, 3),
                        }
                    )
                prev = self.holders.get(item)
                if prev is not None:
                    widest = max(received - prev.sent, prev.received - sent)
                    if widest < self.reclaim_ttl_s - CLOCK_SLACK_S:
                        self.twice.append(
                            {
                                "item": item[:200],
                                "first": prev.holder,
                                "second": holder,
                                "widest_gap_s": round(widest, 3),
                            }
                        )
                    else:
                        self.reclaimed += 1
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

    def backfed(self, items: list[str], acked: bool) -> None:
        with self.lock:
            if acked:
                self.loaded.update(items)
                self.maybe.difference_update(items)
            else:
                self.maybe.update(i for i in items if i not in self.loaded)
