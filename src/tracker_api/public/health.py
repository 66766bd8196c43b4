"""GET /healthz: whether this node can serve warriors now, for load balancers and people.

200 when Redis answers a PING and this node's clock is within --max-clock-offset of Redis's
(tracker_core.infra.redis_clock); otherwise 503 with the reason in one line. The JSON body says both
either way: ``{"ok", "reason", "redis_rtt_s", "clock": {"offset_s", "uncertainty_s",
"max_offset_s", "refusal"}}``. One PING and at most one TIME (when the clock's resync is due):
cheap enough for a check every second from every balancer, and the same for anyone who asks.
"""

from __future__ import annotations

import time

from tracker_api.web.api_spec import BOOL, NULLABLE_STR, declare, json_answer, obj
from tracker_core.infra import redis_clock
from tracker_core.infra.rawredis import RedisError
from tracker_core.items.engine import Engine

HEALTH = obj(("ok", "reason"), ok=BOOL, reason=NULLABLE_STR, clock={"type": "object"})


class HealthCheck:
    def __init__(self, engine: Engine, clock: redis_clock.RedisClock = redis_clock.PROCESS_CLOCK):
        self.engine = engine
        self.clock = clock

    @declare(
        "Whether this node can serve (for load balancers)",
        answers={
            200: json_answer(HEALTH),
            503: json_answer(HEALTH, "Redis does not answer, or the clock is off"),
        },
    )
    def on_get(self, req, resp):
        reason, rtt_s = None, None
        try:
            started = time.perf_counter()
            self.engine.conn.execute_command("PING")
            rtt_s = time.perf_counter() - started
            self.clock.now(self.engine.conn)
        except (RedisError, OSError):
            reason = "Redis does not answer"
        except redis_clock.ClockRefused as exc:
            reason = str(exc)
        resp.status = 200 if reason is None else 503
        resp.set_header("Cache-Control", "no-store")
        resp.media = {
            "ok": reason is None,
            "reason": reason,
            "redis_rtt_s": rtt_s,
            "clock": self.clock.status(),
        }
