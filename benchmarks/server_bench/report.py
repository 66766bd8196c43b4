"""server.md: the run's report in Markdown."""

from __future__ import annotations

from server_bench.plan import AIMS, LOAD_SHARE, WRK_THREADS
from server_bench.sections import aims_section, locust_runs, locust_section
from server_bench.summary import fmt, headline


def report(results: dict) -> str:
    m, v, s = results["machine"], results["versions"], results["summary"]
    lines = [
        f"# Whole-server benchmark, {results['date_utc']}{' (quick)' if results['quick'] else ''}",
        "",
        f"{m['cpu_model']}, {m['cores']} cores, Linux {m['kernel']}; Python {v['python']}, "
        f"Redis {v['redis']}, Falcon {v['falcon']}, bjoern {v['bjoern']}, {v['wrk']}. "
        f"{results['setup']['tracker_workers']} bjoern workers, wrk with {WRK_THREADS} threads on the same cores, "
        f"{results['setup']['duration_s_per_run']} s per run. Load average (1 min) at start "
        f"{m['load_average_at_start'][0]:.2f}, at end {m['load_average_at_end'][0]:.2f}: the machine "
        "is shared with other work and noisy, so read the ratios, and compare runs with care.",
        "",
        f"Command: `{results['command']}`",
        "",
        "## Peak of each scenario (best concurrency level)",
        "",
        "Reference: the open-source tracker, about 1,000 `/request`/s with p99 near 200 ms and "
        "190 µs of Redis CPU per request on this machine class (issue 2).",
        "",
        "| scenario | req/s | conns | items/s | p50 ms | p90 ms | p99 ms | non-2xx | of hello-world | x reference rate | Redis CPU µs/req | reference CPU / ours |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in s.items():
        if not isinstance(row, dict) or "peak_requests_per_s" not in row:
            continue
        lines.append(
            f"| {name} | {fmt(row['peak_requests_per_s'])} | {row['at_connections']} | "
            f"{fmt(row['items_per_s'])} | {fmt(row['p50_ms'])} | {fmt(row['p90_ms'])} | "
            f"{fmt(row['p99_ms'])} | {row['non_2xx']} | {fmt(row['share_of_hello_world'])} | "
            f"{fmt(row['x_reference_rate'], 1)}x | {fmt(row['redis_cpu_us_per_request'], 1)} | "
            f"{fmt(row['reference_cpu_over_ours'], 1)}x |"
        )
    hello = [(r["connection"], r) for r in results["runs"] if r["scenario"] == "hello-world"]
    best_hello = {
        c: max((r for cc, r in hello if cc == c), key=lambda r: r["requests_per_s"]) for c, _ in hello
    }
    lines += [
        "",
        "HTTP ceiling, hello-world Falcon on bjoern (same workers, same wrk script): "
        + "; ".join(
            f"{c} {fmt(r['requests_per_s'])} req/s (p99 {fmt(r['latency_ms']['p99'])} ms)"
            for c, r in best_hello.items()
        )
        + ".",
    ]
    lines += [
        "",
        f"## Below saturation (keep-alive `/request` at about {int(LOAD_SHARE * 100)}% of its peak)",
        "",
        "| method | conns | req/s | of peak | p50 ms | p90 ms | p99 ms | non-2xx | reference p99 / ours |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, label in (
        ("below_saturation", "closed loop (fewest connections)"),
        (
            "below_saturation_paced",
            f"paced ({results['below_saturation_paced']['pause_ms']} ms pause per connection)",
        ),
    ):
        b, r = s[key], results[key]
        lines.append(
            f"| {label} | {b['connections']} | {fmt(b['requests_per_s'])} | "
            f"{100 * b['share_of_peak']:.0f}% | {fmt(b['p50_ms'])} | {fmt(b['p90_ms'])} | "
            f"{fmt(b['p99_ms'])} | {r['non_2xx']} | {fmt(b['reference_p99_over_ours'], 0)}x |"
        )
    lines += [
        "",
        f"Aim: p99 under {AIMS['p99_ms_at_70pct']:g} ms at 70% of the load.",
        "",
        "- Closed loop: " + results["below_saturation"]["method"],
        "- Paced: " + results["below_saturation_paced"]["method"],
        "- At a constant arrival rate, corrected for coordinated omission, with the default worker "
        "count: [capacity.md](capacity.md) (`--part capacity`).",
    ]
    lines += [
        "",
        "## Data layer ceiling (the engine's scripts, pipelined from one hiredis client)",
        "",
        "| mix | calls/s | items/s | EVALSHA µs/call | Redis CPU µs/call |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in results["data_layer"]:
        lines.append(
            f"| {row['mix']} | {fmt(row['calls_per_s'])} | {fmt(row['items_per_s'])} | "
            f"{fmt(row['redis']['evalsha_us_per_call'])} | {fmt(row['redis']['cpu_us_per_request'])} |"
        )
    if "request_share_of_data_layer" in s:
        lines += [
            "",
            f"Peak keep-alive `/request` rate = {fmt(s['request_share_of_data_layer'])} of "
            "the pipelined claim rate.",
        ]
    lines += [
        "",
        "Redis CPU per request is the delta of `used_cpu_sys + used_cpu_user` over the run "
        "divided by the requests wrk counted (it includes Redis's network I/O and AOF); "
        "EVALSHA µs/call is `INFO commandstats` (script execution only). "
        f"Aim: {AIMS['redis_cpu_us_per_claim']:g} µs or less per claim.",
    ]
    lines += aims_section(results)
    if results.get("locust"):
        lines += locust_section(results)
    lines += history_section(results)
    lines += [
        "",
        "## Every run",
        "",
        "| scenario | connection | conns | req/s | p50 ms | p90 ms | p99 ms | max ms | non-2xx | socket errors | EVALSHA µs | Redis CPU µs/req |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for r in results["runs"] + [results["below_saturation"], results["below_saturation_paced"]]:
        redis_figures = r.get("redis", {})
        errors = ", ".join(f"{k} {n}" for k, n in r["socket_errors"].items() if n) or "0"
        lines.append(
            f"| {r['scenario']} | {r['connection']} | {r['connections']} | {fmt(r['requests_per_s'])} | "
            f"{fmt(r['latency_ms']['p50'])} | {fmt(r['latency_ms']['p90'])} | {fmt(r['latency_ms']['p99'])} | "
            f"{fmt(r['latency_ms']['max'])} | {r['non_2xx']} | {errors} | "
            f"{fmt(redis_figures.get('evalsha_us_per_call'))} | {fmt(redis_figures.get('cpu_us_per_request'), 1)} |"
        )
    lines += [
        "",
        "Plots: `server_throughput.png` (throughput vs concurrency), "
        "`server_latency.png` (latency percentiles)"
        + (
            ", `server_irsr_rtt.png` (IRSR, RTT and items claimed per second over each Locust run)."
            if locust_runs(results)
            else "."
        ),
        "",
    ]
    return "\n".join(lines)


def history_section(results: dict) -> list[str]:
    """Earlier runs' headline figures beside this one's (server.json keeps them)."""
    if not results.get("history"):
        return []
    entries = [*results["history"], {**results, "figures": headline(results), "this_run": True}]
    keys = list(headline(results))
    lines = [
        "",
        "## History (earliest first)",
        "",
        "| run | commit | " + " | ".join(keys) + " |",
        "| --- | --- |" + " ---: |" * len(keys),
    ]
    for entry in entries:
        commit = (entry.get("git_commit") or entry.get("versions", {}).get("git_commit") or "")[:10]
        label = entry["date_utc"] + (" (quick)" if entry.get("quick") else "")
        label += " (this run)" if entry.get("this_run") else ""
        lines.append(
            f"| {label} | {commit} | " + " | ".join(fmt(entry["figures"].get(k)) for k in keys) + " |"
        )
    return lines
