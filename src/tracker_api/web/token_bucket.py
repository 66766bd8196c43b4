"""A token bucket: what one worker may spend a second on answers anyone can ask for.

Anonymous answers that cost their bytes however cheaply they are made (a rendered /metrics, the
API's description) are sent within a budget of bytes a second per worker, and answered 429 with
``Retry-After: 1`` past it (tracker_api.public.public_cache, tracker_api.web.openapi): a flood
of 1 MB answers once kept both cores copying 2 GB/s on loopback.
"""

from __future__ import annotations

import time


class TokenBucket:
    """RATE a second, up to BURST saved; ``take(n)`` spends N if they are there."""

    def __init__(self, rate: float, burst: float, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = burst, clock()

    def take(self, size: int) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if size > self.tokens:
            return False
        self.tokens -= size
        return True
