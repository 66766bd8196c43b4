"""The report's sections on the aims and on the Locust runs."""

from __future__ import annotations

from server_bench.plan import AIMS, REFERENCE
from server_bench.summary import fmt, ratio


def locust_runs(results: dict) -> list[dict]:
    return [r for r in (results.get("locust") or {}).get("runs", []) if "error" not in r]


def aims_section(results: dict) -> list[str]:
    """Where the issue-2 aims are met or missed, and why, from this run's figures."""
    s = results["summary"]
    peak, close = s.get("request keep-alive"), s.get("request close")
    closed, paced = s["below_saturation"], s["below_saturation_paced"]
    hello = {
        c: max(
            (
                r["requests_per_s"]
                for r in results["runs"]
                if r["scenario"] == "hello-world" and r["connection"] == c
            ),
            default=None,
        )
        for c in ("keep-alive", "close")
    }
    ceiling = next(r for r in results["data_layer"] if r["mix"] == "claim (request)")
    lines = ["", "## The issue-2 aims: met or missed, and why", ""]
    m = results["machine"]
    load = m["load_average_at_start"][0]  # before this run started anything of its own
    if load > 1.0:
        lines += [
            f"Load average (1 min) {load:.1f} on {m['cores']} cores when this run started "
            "(other work, or the benchmarks run just before): every per-call time below, "
            "even the script's own EVALSHA µs, inflates when the cores are contended. "
            "Compare with a quiet run before reading a change as a regression.",
            "",
        ]
    if peak:
        cpu, script = peak["redis_cpu_us_per_request"], peak["evalsha_us_per_call"]
        aim = AIMS["redis_cpu_us_per_claim"]
        verdict = "**Missed**" if cpu is not None and cpu > aim else "Met"
        lines.append(
            f"- Redis CPU per claim, aim {aim:g} µs: {verdict}, {fmt(cpu, 1)} µs per keep-alive "
            f"`/request` at the peak. The claim script itself takes {fmt(script, 1)} µs "
            "(`INFO commandstats`); the rest is Redis reading each command and writing its reply "
            "on the socket, appending to the AOF (everysec) and its own housekeeping, which "
            "commandstats does not count. Still "
            f"{fmt(peak['reference_cpu_over_ours'], 1)}x less than the open-source tracker's "
            f"{REFERENCE['redis_cpu_us_per_request']:g} µs."
        )
    aim_ms = AIMS["p99_ms_at_70pct"]
    verdict = "**Missed**" if closed["p99_ms"] > aim_ms else "Met"
    lines.append(
        f"- p99 under {aim_ms:g} ms at 70% of the peak: {verdict}, {fmt(closed['p99_ms'])} ms "
        f"closed loop ({closed['connections']} connection{'s' if closed['connections'] != 1 else ''}, "
        f"{100 * closed['share_of_peak']:.0f}% "
        f"of the peak), {fmt(paced['p99_ms'])} ms with paced connections "
        f"({100 * paced['share_of_peak']:.0f}%); p50 {fmt(closed['p50_ms'])} and "
        f"{fmt(paced['p50_ms'])} ms. wrk, the {results['setup']['tracker_workers']} bjoern workers and Redis share the 2 cores "
        f"(and the machine is shared), so the tail includes waiting for a core. Still {fmt(closed['reference_p99_over_ours'], 0)}x under the reference p99 "
        f"({REFERENCE['p99_ms']:g} ms)."
    )
    if peak:
        aim_rate = AIMS["requests_per_s"]
        verdict = "Met" if peak["peak_requests_per_s"] >= aim_rate else "**Missed**"
        redis_core = (
            peak["peak_requests_per_s"] * peak["redis_cpu_us_per_request"] / 1e6
            if peak["redis_cpu_us_per_request"]
            else None
        )
        nearer = (
            "the claim script's cost in Redis"
            if ceiling["calls_per_s"] < (hello["keep-alive"] or 0)
            else "the HTTP layer"
        )
        lines.append(
            f"- {aim_rate:,.0f} `/request`/s: {verdict} with keep-alive, "
            f"{fmt(peak['peak_requests_per_s'])} req/s. Redis alone (the claim script pipelined "
            f"from one client, no HTTP) manages {fmt(ceiling['calls_per_s'])} claims/s, "
            f"{fmt(ratio(ceiling['calls_per_s'], peak['peak_requests_per_s']))}x that; the HTTP "
            f"layer alone (hello-world) {fmt(hello['keep-alive'])} req/s, "
            f"{fmt(ratio(hello['keep-alive'], peak['peak_requests_per_s']))}x. The nearer ceiling "
            f"is {nearer}. At the peak Redis was busy {fmt(redis_core)} of a core; the rest of the "
            f"2 cores went to the {results['setup']['tracker_workers']} bjoern workers (Falcon, JSON, the round trip to Redis) and wrk."
        )
        if close and hello["close"] and hello["keep-alive"]:
            lines.append(
                f"- With `Connection: close`, as warriors send it: {fmt(close['peak_requests_per_s'])} "
                f"req/s. There the HTTP layer limits first: hello-world itself falls from "
                f"{fmt(hello['keep-alive'])} to {fmt(hello['close'])} req/s "
                f"({fmt(hello['close'] / hello['keep-alive'])}) when every request opens and closes a "
                f"TCP connection, and the tracker reaches {fmt(close['share_of_hello_world'])} of "
                "that."
            )
    return lines


def locust_section(results: dict) -> list[str]:
    """The Locust warriors' figures, each beside its references from the same run."""
    locust, s = results["locust"], results["summary"]
    setup = locust["setup"]
    lines = [
        "",
        "## Locust warriors (loadtest/, the whole server with warrior behaviour)",
        "",
        f"Each warrior claims (`Connection: close`, as seesaw-kit), waits a simulated download of "
        f"{setup['download_time_s'].split(':')[1].replace(',', '-')} s (mean "
        f"{setup['download_mean_ms']:g} ms), leaves {100 * setup['fail_share']:g}% of items out "
        f"of done, abandons {100 * setup['abandon_share']:g}% of claims, backfeeds "
        f"{setup['backfeed_items_per_post']} names ({100 * setup['backfeed_repeat_share']:g}% "
        f"repeats) after {100 * setup['backfeed_share']:g}% of claims, and backs off "
        f"{setup['retry_delay_s']:g} s and more after a non-200. One local Locust process, "
        f"{setup['run_time_s']} s per run, all users started within 1 s. Each run has its own "
        "project seeded with more items than it can claim; at the end `loadtest.seeding.account` "
        "(what `tracker status` counts) checks that every seeded and backfed item is queued, out or "
        f"done. Load average (1 min) {locust['load_average_before'][0]:.2f} before, "
        f"{locust['load_average_after'][0]:.2f} after; {locust['seconds']:.0f} s in all.",
        "",
        "| run | claims/s | items claimed/s | items done/s | IRSR | RTT mean / p50 / p95 / p99 ms "
        "| RTT over download ms | `/request` p50 / p95 / p99 ms | `/done` p99 ms | 404 / 429 / 5xx "
        "| items accounted | Locust CPU (cores) |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | --- | --- | ---: |",
    ]
    for r in locust["runs"]:
        if "error" in r:
            lines.append(f"| {r['label']} | failed: {r['error'].splitlines()[0][:120]} |" + " |" * 10)
            continue
        rtt, request = r["rtt_ms"], r["latency_ms"].get("request", {})
        done = r["latency_ms"].get("done", {})
        irsr = "-" if r["irsr"] is None else f"{100 * r['irsr']:.2f}%"
        accounted = "yes" if r["all_items_accounted"] else "**no**: " + "; ".join(r["accounting"]["failures"])
        lines.append(
            f"| {r['label']} | {fmt(r['requests_per_s'])} | {fmt(r['items_claimed_per_s'])} | "
            f"{fmt(r['items_done_per_s'])} | {irsr} | {fmt(rtt['mean'], 0)} / {rtt['p50']} / "
            f"{rtt['p95']} / {rtt['p99']} | {fmt(r['rtt_over_download_mean_ms'], 0)} | "
            f"{fmt(request.get('p50'), 0)} / {fmt(request.get('p95'), 0)} / "
            f"{fmt(request.get('p99'), 0)} | {fmt(done.get('p99'), 0)} | {r['status']['404']} / "
            f"{r['status']['429']} / {r['status']['5xx']} | {accounted} | "
            f"{fmt(r['load_generator_cpu_cores'])} |"
        )
    runs = locust_runs(results)
    close = s.get("request close")
    hello_close = max(
        (
            r["requests_per_s"]
            for r in results["runs"]
            if r["scenario"] == "hello-world" and r["connection"] == "close"
        ),
        default=None,
    )
    ceiling = next(r for r in results["data_layer"] if r["mix"] == "claim (request)")
    if runs and close:
        top = max(runs, key=lambda r: r["requests_per_s"] or 0)
        top_p99 = top["latency_ms"].get("request", {}).get("p99")
        lines += [
            "",
            f"Beside the references from this run, for the busiest Locust run ({top['label']}, "
            f"{fmt(top['requests_per_s'])} claims/s):",
            "",
            "| reference | its figure | Locust / reference |",
            "| --- | ---: | ---: |",
            f"| wrk `/request` with `Connection: close`, peak | {fmt(close['peak_requests_per_s'])} "
            f"req/s, p99 {fmt(close['p99_ms'])} ms | "
            f"{fmt(ratio(top['requests_per_s'], close['peak_requests_per_s']))} of the rate |",
            f"| hello-world Falcon on bjoern, `Connection: close` | {fmt(hello_close)} req/s | "
            f"{fmt(ratio(top['requests_per_s'], hello_close))} |",
            f"| claim script pipelined (data layer ceiling) | {fmt(ceiling['calls_per_s'])} calls/s | "
            f"{fmt(ratio(top['requests_per_s'], ceiling['calls_per_s']))} |",
            f"| open-source tracker | ~{REFERENCE['requests_per_s']:,.0f} req/s, p99 "
            f"~{REFERENCE['p99_ms']:g} ms | {fmt(ratio(top['requests_per_s'], REFERENCE['requests_per_s']))}"
            f"x the rate; `/request` p99 {fmt(top_p99, 0)} ms (reference / ours "
            f"{fmt(ratio(REFERENCE['p99_ms'], top_p99))}) |",
            "",
            "The Locust rates are set by the warriors (users / (download + round trips)), not by "
            f"the tracker's capacity. The busiest run made {fmt(top['http_calls_per_s'])} HTTP "
            "calls/s (claims, dones, backfeeds), "
            f"{fmt(ratio(top['http_calls_per_s'], close['peak_requests_per_s']))} of what wrk drove "
            "through `/request` with `Connection: close`, and its Locust process used "
            f"{fmt(top['load_generator_cpu_cores'])} of a core on the cores the tracker and Redis "
            "use: when RTT over download grows with the users, the latencies Locust records "
            "include waiting for a core on either side. IRSR is the share of "
            "`/request` calls answered with items while items remained; RTT runs from sending the "
            "claim to the done's answer, so RTT over download is what the round trips (and the "
            "load generator) add to the simulated download. "
            + (
                "Every item was accounted for in every run."
                if locust["all_items_accounted"]
                else "**Not every item was accounted for: see the table.**"
            ),
        ]
    return lines
