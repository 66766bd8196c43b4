"""capacity.md: the worker-count table (bjoern beside granian), the default, the constant-rate
latency, and the history of earlier runs."""

from __future__ import annotations

from server_bench.plan import AIMS, LATENCY_CONNECTIONS, LOAD_SHARE, NEAR_BEST, SERVERS
from server_bench.summary import fmt
from server_bench.worker_counts import HELLO


def _sweep_table(results: dict) -> list[str]:
    by_cell = {(r["server"], r["workers"]): r for r in results["medians"]}
    lines = [
        "| workers | "
        + " | ".join(
            f"{s} req/s (min-max) | {s} server CPU µs/req | {s} Redis CPU µs/req | {s} busy share of a worker | {s} p50 / p99 ms"
            for s in SERVERS
        )
        + " |",
        "| ---: |" + " ---: | ---: | ---: | ---: | ---: |" * len(SERVERS),
    ]
    for workers in results["setup"]["counts"]:
        cells = []
        for server in SERVERS:
            r = by_cell.get((server, workers))
            if r is None:
                cells.append("- | - | - | - | -")
                continue
            cells.append(
                f"{fmt(r['requests_per_s'])} ({fmt(r['requests_per_s_min'])}-{fmt(r['requests_per_s_max'])}) | "
                f"{fmt(r['server_cpu_us_per_request'], 0)} | {fmt(r['redis_cpu_us_per_request'], 0)} | "
                f"{fmt(r.get('worker_busy_share'))} | "
                f"{fmt(r['p50_ms'])} / {fmt(r['p99_ms'])}"
            )
        lines.append(f"| {workers} | " + " | ".join(cells) + " |")
    return lines


def _hello_line(results: dict) -> list[str]:
    """The hello-world app under each server in the same rounds: what the HTTP layer costs."""
    rows = [r for r in results["medians"] if r["server"].endswith(HELLO)]
    if not rows:
        return []
    return [
        "",
        "The HTTP layer alone, the hello-world Falcon app (`benchmarks/server_bench/hello_app.py`) in the same "
        "rounds: "
        + "; ".join(
            f"{r['server'].removesuffix(HELLO)} with {r['workers']} workers {fmt(r['requests_per_s'])} "
            f"req/s, {fmt(r['server_cpu_us_per_request'], 0)} µs of server CPU a request"
            for r in rows
        )
        + ".",
    ]


def _latency_runs(results: dict) -> list[str]:
    """Every constant-rate run, with the CPU each request cost at that rate."""
    runs = results.get("latency_runs") or []
    if not runs:
        return []
    lines = [
        "",
        "Every constant-rate run, in the order run (each after its own peak probe):",
        "",
        "| run | share offered | peak just before /s | answered /s | p50 ms | p99 ms | max ms | found every connection busy | server CPU µs/req | Redis CPU µs/req | client CPU µs/req | cores busy | Redis forks | load (1 min) | connections per worker |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in runs:
        lines.append(
            f"| {r['run']} | {100 * r.get('share_offered', LOAD_SHARE):.0f}% | {fmt(r['peak_requests_per_s'])} | "
            f"{fmt(r['requests_per_s'])} | {fmt(r['latency_ms']['p50'])} | {fmt(r['latency_ms']['p99'])} | "
            f"{fmt(r['latency_ms']['max'])} | {100 * r['queued_for_a_connection'] / max(1, r['requests']):.1f}% | "
            f"{fmt(r['server_cpu_us_per_request'], 0)} | {fmt(r['redis_cpu_us_per_request'], 0)} | "
            f"{fmt(r['client_cpu_us_per_request'], 0)} | {fmt(cores_busy(r), 2)} | {fmt(r.get('redis_forks'))} | "
            f"{fmt(r.get('load_average'), 2)} | {'/'.join(map(str, r.get('connections_per_worker') or ['-']))} |"
        )
    lines += [
        "",
        "Cores busy: answered/s x (server + Redis + client CPU per request), the cores the run "
        f"kept busy out of {results['machine']['cores']} (the kernel's network work is partly in "
        "these, partly not). Redis forks: AOF rewrites started during the run (the fork stops Redis "
        "for 1-7 ms here and the rewrite takes a core for 0.1-0.3 s). Load: the 1-minute load "
        "average at the run's end, this benchmark's own processes included. Connections per "
        f"worker: how many of the client's {LATENCY_CONNECTIONS} keep-alive connections each bjoern "
        "worker accepted (`ss -tnp`), most first; a worker holds its connections for the run, and "
        "every request sent on one waits for that worker.",
    ]
    d = results["default"]
    at_peak = next(
        (r for r in results["medians"] if r["server"] == "bjoern" and r["workers"] == d["workers"]), None
    )
    if at_peak:
        lines += [
            "",
            f"At the peak (the sweep, {d['workers']} workers, wrk keep-alive) a request cost "
            f"{fmt(at_peak['server_cpu_us_per_request'], 0)} µs of server CPU and "
            f"{fmt(at_peak['redis_cpu_us_per_request'], 0)} µs of Redis CPU. Requests arriving one by "
            "one cost more: each wakes a worker and Redis on its own, where at saturation one wake-up "
            "serves several (epoll returns a batch, Redis reads several commands a loop). On 2 cores "
            "shared by the workers, Redis, the client and other work, 70% of the saturated rate "
            "can therefore be near the cores' limit at a constant rate.",
        ]
    return lines


def cores_busy(run: dict) -> float | None:
    """The cores a constant-rate RUN kept busy: its rate x the server's, Redis's and the client's
    CPU per request."""
    parts = [run.get(f"{who}_cpu_us_per_request") for who in ("server", "redis", "client")]
    if run.get("requests_per_s") is None or None in parts:
        return None
    return run["requests_per_s"] * sum(parts) / 1e6


def _default_line(results: dict) -> str:
    """The default against this run's best bjoern count: its share of the best median rate, and
    whether their rounds' ranges overlap (then the two are not told apart on this machine)."""
    d = results["default"]
    rows = {r["workers"]: r for r in results["medians"] if r["server"] == "bjoern"}
    line = (
        f"**Default**: `--workers` is {d['workers_per_core']} per core, {d['workers']} here "
        f"(tracker_api.server.default_workers); this run's best for bjoern is {d['measured_best_bjoern']}."
    )
    default, best = rows.get(d["workers"]), rows.get(d["measured_best_bjoern"])
    if default is None or best is None or default is best:
        return line
    overlap = default["requests_per_s_max"] >= best["requests_per_s_min"]
    return line + (
        f" The default's median is {100 * default['requests_per_s'] / best['requests_per_s']:.0f}% of "
        f"the best's; their rounds' ranges {'overlap: not told apart here' if overlap else 'do not overlap'} "
        "(docs/operations.md, Sizing, says when to change WORKERS_PER_CORE)."
    )


def _history(results: dict) -> list[str]:
    entries = [*results["history"], {**results, "this_run": True}]
    keys = [k for k in results["figures"] if k.startswith("bjoern_")] + [
        "default_workers",
        "rate_at_70pct",
        "p99_ms_at_70pct",
        "latency_method",
    ]
    lines = [
        "| run | commit | " + " | ".join(keys) + " |",
        "| --- | --- |" + " ---: |" * len(keys),
    ]
    for entry in entries:
        commit = (entry.get("git_commit") or entry.get("measured_commit") or "")[:10]
        label = (
            entry["date_utc"]
            + (" (quick)" if entry.get("quick") else "")
            + (" (this run)" if entry.get("this_run") else "")
        )
        lines.append(
            f"| {label} | {commit} | "
            + " | ".join(fmt(entry["figures"].get(k, 1 if k == "latency_method" else None)) for k in keys)
            + " |"
        )
    return lines


def report(results: dict) -> str:
    m, v, d, lat = results["machine"], results["versions"], results["default"], results["latency"]
    setup = results["setup"]
    best = results["best"]
    aim = AIMS["p99_ms_at_70pct"]
    lines = [
        f"# Worker count, bjoern beside granian, p99 at {int(LOAD_SHARE * 100)}% of the peak"
        f" ({results['date_utc']}{', quick' if results['quick'] else ''})",
        "",
        f"{m['cpu_model']}, {m['cores']} cores (shared with other work), Linux {m['kernel']}; Python "
        f"{v['python']}, Redis {v['redis']}, Falcon {v['falcon']}, bjoern {v['bjoern']}, granian "
        f"{v['granian']}, {v['wrk']}. Tracker at commit {results['measured_commit']}, measured from "
        f"`{results['measured_source']}`. Load average (1 min) {m['load_average_at_start'][0]:.2f} at "
        f"the start, {m['load_average_at_end'][0]:.2f} at the end"
        + (f"; run at nice {setup['nice']}, ahead of that other work." if setup.get("nice", 0) < 0 else "."),
        "",
        f"Command: `{results['command']}` ({results['seconds_total']:.0f} s)",
        "",
        "## `/request` by worker count",
        "",
        f"wrk keep-alive, `benchmarks/wrk/request.lua`, {setup['wrk_connections']} connections, "
        f"every server started once and warmed up for {setup['warmup_s']} s, then {setup['rounds']} "
        f"round(s) of a {setup['seconds_per_cell']} s slice of each, every round in another order; "
        "medians over the rounds (the rate's min-max beside it). Server CPU is utime+stime of the "
        "server's whole process tree (/proc) per request; Redis CPU is `INFO cpu` per request; a "
        "worker's busy share is rate x server CPU per request / workers: the part of the wall time "
        "a worker computes, the rest it waits (for Redis, a core, wrk). "
        f"granian runs the same app (`tracker_api.server.make_app`) with `{setup['granian']}`: one "
        "Python thread per worker, as bjoern serves one request at a time.",
        "",
        *_sweep_table(results),
        *_hello_line(results),
        "",
        f"Fewest workers within {int(round((1 - NEAR_BEST) * 100))}% of the best median rate: bjoern "
        f"{best['bjoern']['workers']} ({fmt(best['bjoern']['requests_per_s'])} req/s; best "
        f"{fmt(best['bjoern']['best_requests_per_s'])}), granian {best['granian']['workers']} "
        f"({fmt(best['granian']['requests_per_s'])}; best {fmt(best['granian']['best_requests_per_s'])}).",
        "",
        _default_line(results),
        "",
        f"## p99 of `/request` at {int(LOAD_SHARE * 100)}% of the peak, constant arrival rate",
        "",
        f"{d['workers']} bjoern workers. Each run first measures the peak on the same server (wrk "
        f"keep-alive, {results['setup'].get('peak_probe_s', 3)} s, as above), then offers "
        f"{int(LOAD_SHARE * 100)}% of it for {setup['latency_s']:g} s; {setup['latency_runs']} run(s), "
        f"the median run by p99 shown (its peak {fmt(lat.get('peak_requests_per_s'))} req/s; the "
        f"sweep's median at {d['peak_measured_at_workers']} workers {fmt(d['peak_requests_per_s'])}).",
        "",
        "| offered /s | answered /s | of peak | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | p99 each run | client late p99 ms | found every connection busy | p99 from send ms | client CPU µs/req |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
        f"| {fmt(lat['target_per_s'])} | {fmt(lat['requests_per_s'])} | {100 * lat['share_of_peak']:.0f}% | "
        f"{fmt(lat['latency_ms']['p50'])} | {fmt(lat['latency_ms']['p90'])} | {fmt(lat['latency_ms']['p99'])} | "
        f"{fmt(lat['latency_ms']['p999'])} | {fmt(lat['latency_ms']['max'])} | "
        f"{', '.join(fmt(p) for p in lat['p99_ms_each_run'])} | {fmt(lat['send_lag_ms']['p99'])} | "
        f"{100 * lat.get('queued_share', 0):.1f}% | "
        f"{fmt(lat['latency_from_send_ms']['p99'])} | {fmt(lat['client_cpu_us_per_request'], 0)} |",
        "",
        f"Aim: p99 under {aim:g} ms: **{'met' if lat['met'] else 'missed'}**.",
        "",
        "Method: " + lat["method"],
        "",
        "Client late: how long after its due time a request went out while a connection was free "
        "(the client's own delay). Found every connection busy: the server held all "
        f"{LATENCY_CONNECTIONS} requests, so these waited in the client, their wait counted in the "
        "latency. p99 from send: what a closed-loop tool such as wrk would have reported.",
        *_latency_runs(results),
        "",
        "## History",
        "",
        "Median req/s per bjoern worker count, the default, and the constant-rate figures of every "
        "run kept in capacity.json (earliest first). Latency method 1: the client took its "
        "connections in turn; 2: the connection freed last first; 3: short waits ended by an answer "
        "(2 read answers up to 2 ms late below 1,000 requests/s); 4: the AOF compacted after each "
        "run's item top-up, before the run. The first three runs offered 70% "
        "of the sweep's median peak, the later ones 70% of a peak probed on the same server just "
        "before.",
        "",
        *_history(results),
        "",
    ]
    return "\n".join(lines)
