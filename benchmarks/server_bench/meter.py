"""Redis's own accounting around a run: EVALSHA calls and time, and process CPU."""

from __future__ import annotations

from tracker_core.admin.context import AdminContext


class RedisMeter:
    """Redis's own accounting around a run: EVALSHA calls and time, and process CPU."""

    def __init__(self, admin: AdminContext):
        self.r = admin.conn
        self.before: dict | None = None

    def snapshot(self) -> dict:
        stats = self.r.info("commandstats").get("cmdstat_evalsha", {})
        cpu = self.r.info("cpu")
        return {
            "evalsha_calls": int(stats.get("calls", 0)),
            "evalsha_usec": int(stats.get("usec", 0)),
            "cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
        }

    def start(self) -> None:
        self.before = self.snapshot()

    def stop(self, requests: int) -> dict:
        after, before = self.snapshot(), self.before
        calls = after["evalsha_calls"] - before["evalsha_calls"]
        usec = after["evalsha_usec"] - before["evalsha_usec"]
        cpu_us = (after["cpu_s"] - before["cpu_s"]) * 1e6
        return {
            "evalsha_calls": calls,
            "evalsha_us_per_call": round(usec / calls, 2) if calls else None,
            "cpu_us_per_request": round(cpu_us / requests, 2) if requests else None,
        }
