"""cpu.md: the headline figures beside every earlier run's, and what each case measured."""

from __future__ import annotations

from cpu_bench.history import AIMS, HEADLINES, shown_history


def _shown(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "-".join(_shown(v) for v in value)
    if isinstance(value, float) and value >= 1000 or isinstance(value, int):
        return f"{value:,.0f}"
    return f"{value:.1f}"


def _load(results: dict) -> str:
    if "load_average" in results:
        start, end = results["load_average"]["start"][0], results["load_average"]["end"][0]
    else:  # runs from before the harness
        start, end = (
            results["machine"]["load_average_at_start"][0],
            results["machine"]["load_average_at_end"][0],
        )
    return f"{start:.1f} at the start, {end:.1f} at the end (1 minute)"


def _full_load(results: dict) -> list[str]:
    """The How line of the full-load rows (runs from before them have none)."""
    busy = results["cases"].get("request_busy")
    if busy is None:
        return []
    return [
        f"- full load: `tracker serve` with its default {results['setup']['full_load_workers']} "
        f"workers (2 a core) and the hello-world with as many, under {busy['connections']} wrk "
        "keep-alive connections, the same Redis over TCP (and `/request` again over a Unix "
        "socket); worker CPU summed over the workers. A core that idles between requests pays "
        "for going to sleep and waking up again (on this VM several µs of system time a round "
        "trip, in the worker and in Redis alike), so one worker at part load spends more CPU per "
        "request than a busy server: the full-load rows are the cost that sets a server's "
        "capacity, and Redis CPU per claim at full load is what caps one project (1 s / that "
        "cost claims a second per Redis core). The hello-world with one Redis PING a request "
        "(through the tracker's own client, tracker_core.infra.rawredis) is the floor of any request "
        "that asks Redis once: what a "
        "`/request` costs above it is the tracker's own work.",
    ]


def report(results: dict) -> str:
    history = shown_history(results["history"])
    floor = results["figures"].get("hello_worker_cpu_us")
    lines = [
        "# CPU per request (issue 16)",
        "",
        f"Run {results.get('date') or results.get('date_utc')} with `{results['command']}` on {results['machine']['cpu_model']} "
        f"({results['machine']['cores']} cores, shared); Redis {results['versions']['redis']} "
        f"(AOF off, TCP loopback but for the Unix-socket rows); commit {results['versions']['git_commit']}.",
        "",
        "Worker CPU is utime+stime from /proc of the bjoern workers (one, but for the full-load "
        "rows); Redis CPU is "
        "used_cpu_sys+used_cpu_user from `INFO cpu` (network included); a script's own time is "
        "EVALSHA's usec per call in `INFO commandstats`, timed by the clock, so on a loaded machine "
        "it counts waits for a core and can exceed the CPU. Each is a delta over the measured run "
        "divided by its requests (items for backfeed). Rates share the cores with wrk, Redis and "
        f"other work: load average {_load(results)}.",
        "",
        "The aims were set where hello-world cost 15 µs of worker CPU a request; here it costs "
        f"{_shown(floor)} µs, so a figure is also fair against the aim times {_shown(floor)}/15."
        if floor
        else "",
        "",
        "| what | unit | aim | this run | " + " | ".join(h["label"] for h in reversed(history)) + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in history) + " |",
    ]
    for key, what, unit in HEADLINES:
        earlier = " | ".join(_shown(h["figures"].get(key)) for h in reversed(history))
        aim = AIMS.get(key, "")
        lines.append(f"| {what} | {unit} | {aim} | {_shown(results['figures'].get(key))} | {earlier} |")
    cases = results["cases"]
    lines += [
        "",
        "## How",
        "",
        *_full_load(results),
        f"- `/request`, `/done`, hello-world: wrk keep-alive, {results['setup']['wrk_threads']} threads, "
        f"{cases['request']['connections']} connections, {results['setup']['seconds_per_case']} s measured"
        + (
            f" after a {results['setup']['probe_s']} s probe that sizes the items"
            if results["setup"]["probe_s"]
            else ""
        )
        + "; `/request` uses "
        "benchmarks/wrk/request.lua (500 downloader names a thread), `/done` done.lua over items "
        "claimed just before (each reported once: "
        f"{cases['done']['repeats']} repeats), hello-world request.lua on benchmarks/server_bench/hello_app.py.",
        f"- backfeed: backfeed.lua (`new`: {cases['backfeed']['items_sent']:,} names never sent "
        f"before, 400 a post, {cases['backfeed']['connections']} connections) into a filter sized "
        f"for the run at 1e-6 ({len(cases['backfeed']['bloom']['layers'])} layer); new items "
        f"counted in the backfeed queue: {cases['backfeed']['new_items']:,}; the same into a "
        f"fingerprint filter ({cases['backfeed_fingerprint']['items_sent']:,} names, "
        f"{cases['backfeed_fingerprint']['new_items']:,} new, blocked: "
        f"{'yes' if cases['backfeed_fingerprint'].get('bloom_block') else 'no'}). Each queue (a set) "
        "starts empty and ends holding every new item: Redis's cost per new item grows with it (the "
        "set's SADD of a member, ~0.6 µs in a set of 200k, ~1.5 in one of 6M, as it grows), so a "
        "longer run measures more per item; `--only backfeed_fingerprint --seconds N` shows it.",
        f"- claim script alone: Engine.claim one call at a time from Python "
        f"({cases['claim_script']['calls']:,} calls, multi=1), so Redis CPU per call includes one "
        "round trip's reading and writing, and commandstats gives the script's own time.",
        "- Redis commands (those the scripts run included) per `/request`: "
        f"{cases['request']['redis_commands_per_unit']}; "
        f"per `/done`: {cases['done']['redis_commands_per_unit']}; failures (non-2xx): "
        f"`/request` {cases['request']['non_2xx']}, `/done` {cases['done']['non_2xx']}, "
        f"backfeed {cases['backfeed']['non_2xx']} and {cases['backfeed_fingerprint']['non_2xx']}.",
        "",
    ]
    return "\n".join(lines)
