"""The wrk runs over concurrency levels, and the latency below saturation."""

from __future__ import annotations

from server_bench.items import ItemSupply
from server_bench.meter import RedisMeter
from server_bench.plan import LOAD_SHARE, PACE_MS, WRK_THREADS, Plan
from server_bench.wrk import run_wrk


def sweep(
    label: str,
    url: str,
    script: str,
    plan: Plan,
    meter: RedisMeter | None,
    before_run=None,
    items_per_request: int = 1,
    supply: ItemSupply | None = None,
    script_args=lambda connections: (),
    after_run=None,
) -> list[dict]:
    """Run SCRIPT against URL at every concurrency level, keep-alive and Connection: close."""
    runs = []
    for close in (False, True):
        for connections in plan.levels:
            if before_run is not None:
                before_run()
            todo_before = supply.todo() if supply else None
            if meter:
                meter.start()
            figures = run_wrk(url, script, connections, plan.duration_s, close, script_args(connections))
            run = {
                "scenario": label,
                "connection": "close" if close else "keep-alive",
                "connections": connections,
                **figures,
            }
            if meter:
                run["redis"] = meter.stop(figures["requests"])
            if supply is not None and items_per_request > 1:
                run["items_per_s"] = round((todo_before - supply.todo()) / figures["seconds"], 1)
            if supply is not None:
                supply.recycle()
            runs.append(run)
            if after_run is not None:
                after_run(run)
            print(
                f"  {label:>22} {run['connection']:>10} c={connections:<3} "
                f"{figures['requests_per_s']:>9.0f} req/s  p50 {figures['latency_ms']['p50']:.2f} "
                f"p99 {figures['latency_ms']['p99']:.2f} ms  non-2xx {figures['non_2xx']}",
                flush=True,
            )
    return runs


class BelowSaturation:
    """Latency at about LOAD_SHARE of the peak rate of URL, by two methods (paced, closed loop)."""

    def __init__(self, url: str, peak_per_s: float, plan: Plan, meter: RedisMeter, supply: ItemSupply):
        self.url, self.peak_per_s, self.plan, self.meter, self.supply = url, peak_per_s, plan, meter, supply
        self.target = LOAD_SHARE * peak_per_s

    def paced(self, p50_ms: float) -> dict:
        """Paced connections, their count calibrated first."""
        target, supply = self.target, self.supply
        connections = max(WRK_THREADS, round(target * (PACE_MS + p50_ms) / 1000))
        calibration_s = 1
        for _ in range(5 if self.plan.duration_s > 2 else 3):
            supply.top_up(int(target * calibration_s * 1.5))
            probe = run_wrk(self.url, "paced_request.lua", connections, calibration_s, False, (PACE_MS,))
            supply.recycle()
            achieved = max(probe["requests_per_s"], 1.0)
            print(f"  calibrating: c={connections} {achieved:.0f} req/s (target {target:.0f})", flush=True)
            if abs(achieved / target - 1) < 0.05:
                break
            # Past saturation more connections only queue: never grow by more than half at once.
            connections = max(WRK_THREADS, round(connections * min(target / achieved, 1.5)))
        how = {"pause_ms": PACE_MS, "target_per_s": round(target, 1)}
        return self._measure("paced_request.lua", (PACE_MS,), connections, "request (paced)", "paced", how)

    def closed_loop(self) -> dict:
        """The fewest back-to-back connections reaching the target."""
        target, supply = self.target, self.supply
        probes = []
        for connections in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16):
            supply.top_up(int(target * 1.5))
            probe = run_wrk(self.url, "request.lua", connections, 1, False)
            supply.recycle()
            probes.append({"connections": connections, "requests_per_s": probe["requests_per_s"]})
            print(
                f"  probing: c={connections} {probe['requests_per_s']:.0f} req/s (target {target:.0f})",
                flush=True,
            )
            if probe["requests_per_s"] >= 0.95 * target:
                break
        how = {"target_per_s": round(target, 1), "probes": probes}
        return self._measure("request.lua", (), connections, "request (closed loop)", "closed loop", how)

    def _measure(
        self, script: str, script_args: tuple, connections: int, scenario: str, label: str, how: dict
    ) -> dict:
        """The measured run once CONNECTIONS is chosen: HOW (the method's own fields), the share
        of the peak reached, wrk's figures and Redis's."""
        self.supply.top_up(int(self.target * self.plan.duration_s * 1.5))
        self.meter.start()
        figures = run_wrk(self.url, script, connections, self.plan.duration_s, False, script_args)
        run = {
            "scenario": scenario,
            "connection": "keep-alive",
            "connections": connections,
            **how,
            "share_of_peak": round(figures["requests_per_s"] / self.peak_per_s, 3),
            **figures,
            "redis": self.meter.stop(figures["requests"]),
        }
        self.supply.recycle()
        print(
            f"  {label}: c={connections} {figures['requests_per_s']:.0f} req/s "
            f"({100 * run['share_of_peak']:.0f}% of peak) p50 {figures['latency_ms']['p50']:.2f} "
            f"p90 {figures['latency_ms']['p90']:.2f} p99 {figures['latency_ms']['p99']:.2f} ms",
            flush=True,
        )
        return run


def best(runs: list[dict], scenario: str, connection: str) -> dict | None:
    """The fastest run of SCENARIO over CONNECTION, not counting runs where over 1% failed."""
    chosen = [r for r in runs if r["scenario"] == scenario and r["connection"] == connection]
    clean = [r for r in chosen if r["non_2xx"] <= 0.01 * r["requests"]] or chosen
    return max(clean, key=lambda r: r["requests_per_s"]) if clean else None
