"""The headline figures of a run (its "summary"), and the number formatting the report uses."""

from __future__ import annotations

from server_bench.plan import MULTI, REFERENCE
from server_bench.sweeps import best


def ratio(value, reference):
    return round(value / reference, 2) if value is not None and reference else None


def summarise(results: dict) -> dict:
    runs = results["runs"]
    summary = {}
    for scenario in ("request", f"multi={MULTI}", "done"):
        for connection in ("keep-alive", "close"):
            top = best(runs, scenario, connection)
            hello = best(runs, "hello-world", connection)
            if top is None:
                continue
            summary[f"{scenario} {connection}"] = {
                "peak_requests_per_s": top["requests_per_s"],
                "at_connections": top["connections"],
                "items_per_s": top.get("items_per_s", top["requests_per_s"]),
                "p50_ms": top["latency_ms"]["p50"],
                "p90_ms": top["latency_ms"]["p90"],
                "p99_ms": top["latency_ms"]["p99"],
                "non_2xx": top["non_2xx"],
                "share_of_hello_world": ratio(top["requests_per_s"], hello and hello["requests_per_s"]),
                "x_reference_rate": ratio(top["requests_per_s"], REFERENCE["requests_per_s"]),
                "evalsha_us_per_call": top["redis"]["evalsha_us_per_call"],
                "redis_cpu_us_per_request": top["redis"]["cpu_us_per_request"],
                "reference_cpu_over_ours": ratio(
                    REFERENCE["redis_cpu_us_per_request"], top["redis"]["cpu_us_per_request"]
                ),
            }
    for key in ("below_saturation", "below_saturation_paced"):
        paced = results[key]
        summary[key] = {
            "connections": paced["connections"],
            "requests_per_s": paced["requests_per_s"],
            "share_of_peak": paced["share_of_peak"],
            "p50_ms": paced["latency_ms"]["p50"],
            "p90_ms": paced["latency_ms"]["p90"],
            "p99_ms": paced["latency_ms"]["p99"],
            "reference_p99_over_ours": ratio(REFERENCE["p99_ms"], paced["latency_ms"]["p99"]),
        }
    claim_ceiling = next(r for r in results["data_layer"] if r["mix"] == "claim (request)")
    peak = summary.get("request keep-alive")
    if peak:
        summary["request_share_of_data_layer"] = ratio(
            peak["peak_requests_per_s"], claim_ceiling["calls_per_s"]
        )
    return summary


def headline(results: dict) -> dict:
    """What the history keeps of a run: each scenario's peak and Redis CPU, the p99 below saturation."""
    s = results["summary"]
    figures = {"tracker_workers": results["setup"]["tracker_workers"]}
    for name, row in s.items():
        if isinstance(row, dict) and "peak_requests_per_s" in row:
            figures[f"{name} req/s"] = row["peak_requests_per_s"]
            figures[f"{name} Redis CPU µs"] = row["redis_cpu_us_per_request"]
    for key in ("below_saturation", "below_saturation_paced"):
        figures[f"{key} p99 ms"] = s[key]["p99_ms"]
    return figures


def carried_history(previous: dict | None, figures=None, **extra) -> list[dict]:
    """The history for a new run: the previous results' own history plus an entry for them,
    with FIGURES(previous) as its figures (default: server.json's headline) and EXTRA fields."""
    if previous is None:
        return []
    entry = {
        "date_utc": previous["date_utc"],
        "quick": previous["quick"],
        "git_commit": previous["versions"].get("git_commit"),
        **extra,
        "figures": (figures or headline)(previous),
    }
    return [*previous.get("history", []), entry]


def fmt(value, digits=2):
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"
