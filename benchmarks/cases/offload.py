"""Load many short items into a project with offloading on; drain them all through claims.

What the issue asks: 50 million short items, Redis memory under a configured budget, and the
whole queue draining in order through claims. Here:

- The project's Bloom filter is sized for --items up front (as `tracker backfeed filter
  --capacity N` does), so it is one layer at 1e-6: about 3.6 bytes per item, allocated at once.
  The budget counts it: budget = Bloom filter bytes + --queue-budget-mb for everything else
  (queues up to the watermarks, the staging set, done up to its watermark, logs, scripts).
  Redis's own used_memory_peak is compared with it, not a sample.
- Loading runs the same script every way in runs (bloom_add: test-and-set plus SADD), from
  --loaders threads over raw hiredis connections, 400 items a call (bloom.BATCH); while it
  runs, a real `tracker maintain` process offloads todo beyond the high watermark.
- Draining claims --multi items a call and marks them done (done_mode=offload: done items
  beyond done_offload_high go to segment files too) while the same maintain process refills
  todo below the low watermark. Every item must be claimed exactly once (a byte per item);
  segments must come back oldest first; the mean load position of the items claimed in each
  tenth of the drain shows how close to FIFO the drain is.
- A short sample of the CLI's path (the items.add verb over redis-py, as `tracker items add`
  does) is timed beside it; --probe-only times each load path at 1 and at 6 filter layers
  (load_probes in the results), to show where loading time goes beyond the script.

Runtime, measured on the 2-core machine the results were written on (results/offload.json):
35 million items took 42 minutes (load 21k items/s, 28 min, its first 10 min shared with
another benchmark; drain 42k items/s, 14 min). The load is bound by Redis running bloom_add
(28-40 us of script time per item here), the drain by the claim and done scripts, so 50
million items take about an hour on such a machine. --probe-only takes about 2 minutes.

    PYTHONPATH=benchmarks python -m harness --only offload --set items=35000000   # the results
    PYTHONPATH=benchmarks python -m harness --only offload --set probes=true       # + load_probes

The offload_refill case (issue 27) drains offloaded items through real HTTP instead: a real `tracker serve`
(default workers) and `tracker maintain` (default interval), CLIENTS processes each claiming
multi=100 and reporting every claim done over a keep-alive connection as fast as they can; an
empty answer is counted while items still wait (on disk or in the queue), then the client pauses
EMPTY_PAUSE_S and asks again. Per watermark case (REFILL_CASES): empty answers, the time clients
spent after them, items/s, Redis memory, every item handed out exactly once. Written to
results/offload_refill.json and .md under its label (earlier runs keep theirs, in the history).

    PYTHONPATH=benchmarks python -m harness --only offload_refill --set label=after   # 1M a case
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import Bench, case
from harness.results import provenance_line
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import free_port
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items import bloom
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_registry

P = "big"
CLI_SAMPLE = 100_000


def load(url: str, k: ProjectKeys, total: int, loaders: int) -> dict:
    """Add items 0..TOTAL-1 (hex names) through the Bloom filter from LOADERS threads."""
    lock = threading.Lock()
    cursor = [0]
    counts = {"new": 0, "seen": 0, "script_s": 0.0}

    def work():
        conn = RawRedis(url)
        seen_filter = bloom.BloomFilter(conn, k)
        new = seen = 0
        while True:
            with lock:
                start = cursor[0]
                cursor[0] = min(total, start + bloom.BATCH)
            if start >= total:
                break
            names = [f"{i:x}" for i in range(start, min(start + bloom.BATCH, total))]
            result = seen_filter.add(names, target=k.todo)
            if result.status != bloom.OK:
                raise RuntimeError(f"bloom_add failed: {result.status}")
            new, seen = new + result.new, seen + result.seen
        with lock:
            counts["new"] += new
            counts["seen"] += seen

    threads = [threading.Thread(target=work) for _ in range(loaders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def cli_path_sample(url: str, n: int) -> dict:
    """Time the items.add verb (redis-py, what `tracker items add` runs) on N items of a new project."""
    admin = AdminContext.from_url(url)
    project_verbs.create(admin, "clisample")
    names = [f"cli-{i:x}" for i in range(n)]
    t0 = time.perf_counter()
    item_verbs.add(admin, "clisample", names, batch=5000)
    wall = time.perf_counter() - t0
    project_verbs.delete(admin, "clisample")
    return {"items": n, "items_per_s": round(n / wall)}


def load_probes(url: str, n: int = 100_000) -> dict:
    """Where loading time goes: the same N adds through each client, at 1 and at 6 layers.

    A filter left at its default size grows a layer each time it fills (1M, 2M, 4M... items),
    and every layer adds its k bit positions to each item's script arguments and a probe to
    its test: 50M items reach 6 layers. A filter of capacity 10k reaches 6 layers (with the
    same k per layer) after 310k items, so its cost per item is measured here cheaply.
    """
    admin = AdminContext.from_url(url)
    r = admin.conn
    out = {}

    def measure(label, project, capacity, prefill, run):
        project_verbs.create(admin, project)
        k = ProjectKeys(project)
        bloom.configure(r, k, bloom.Geometry(capacity=capacity), replace=True)
        if prefill:
            load(url, k, prefill, 2)
        names = [f"p-{i:x}" for i in range(n)]
        before = script_time_us(r).get("evalsha", {"usec": 0})["usec"]
        t0 = time.perf_counter()
        run(project, k, names)
        wall = time.perf_counter() - t0
        usec = script_time_us(r)["evalsha"]["usec"] - before
        layers = int(r.hget(k.bloom, "layers") or 1)
        out[label] = {
            "layers": layers,
            "items_per_s": round(n / wall),
            "redis_script_us_per_item": round(usec / n, 1),
            "client_us_per_item": round((wall * 1e6 - usec) / n, 1),
        }
        project_verbs.delete(admin, project)

    def cli(project, k, names):  # what `tracker items add` runs (redis-py)
        item_verbs.add(admin, project, names, batch=5000)

    def raw(project, k, names):  # one raw hiredis connection, one thread
        seen_filter = bloom.BloomFilter(RawRedis(url), k)
        for i in range(0, len(names), bloom.BATCH):
            seen_filter.add(names[i : i + bloom.BATCH], target=k.todo)

    def raw2(project, k, names):  # two threads, each its own connection
        chunks = [names[i::2] for i in range(2)]
        threads = [threading.Thread(target=raw, args=(project, k, c)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    measure("cli_redis_py_1_layer", "probe1", 10 * n, 0, cli)
    measure("raw_1_thread_1_layer", "probe2", 10 * n, 0, raw)
    measure("raw_2_threads_1_layer", "probe3", 10 * n, 0, raw2)
    measure("cli_redis_py_6_layers", "probe4", 10_000, 310_000, cli)
    measure("raw_1_thread_6_layers", "probe5", 10_000, 310_000, raw)
    return out


def used_memory(r) -> int:
    return int(r.info("memory")["used_memory"])


def sample_peaks(stop: threading.Event, every_s: float, **read) -> dict[str, int]:
    """The highest value each of READ (name -> callable) gave, sampled every EVERY_S by a thread
    until STOP."""
    peaks = dict.fromkeys(read, 0)

    def sample():
        while not stop.wait(every_s):
            for name, value in read.items():
                try:
                    peaks[name] = max(peaks[name], value())
                except Exception:  # noqa: BLE001 - the sampler must not end the run
                    pass

    threading.Thread(target=sample, daemon=True).start()
    return peaks


def script_time_us(r) -> dict:
    """Redis-side time of the scripts so far, per call (INFO commandstats)."""
    stats = r.info("commandstats")
    out = {}
    for name in ("evalsha", "eval"):
        entry = stats.get(f"cmdstat_{name}")
        if entry:
            out[name] = {"calls": entry["calls"], "usec": entry["usec"]}
    return out


# --- The refill drain (issue 27): offloaded items drained through real HTTP -----------------------

REFILL_CASES = {
    # offload_segment_items at its default (50,000) and the least room between the watermarks a
    # segment of that size leaves (high - low >= one segment).
    "default": {"offload_high": "100000", "offload_low": "50000", "offload_segment_items": "50000"},
    # The watermarks issue 27 measured with (492 empty answers in a 30,000-item drain).
    "small": {"offload_high": "2000", "offload_low": "1000", "offload_segment_items": "1000"},
}
EMPTY_PAUSE_S = 0.02  # a client's pause after an empty answer (a real warrior's is 60 s)
DRAIN_MULTI = 100


def items_waiting(r, k: ProjectKeys) -> int:
    """Queue items in Redis or on disk (staged included): what a drain has still to hand out."""
    return sum(r.scard(q) for q in k.shared_queues()) + segment_registry.offloaded_count(r, k)


def _drain_client(port, redis_url, project, multi, pause_s, go, report) -> None:
    """One client of http_drain (a process of its own): claim MULTI, report them done, again,
    until a 404 finds nothing waiting; REPORT gets its names and counts."""
    import http.client

    import redis as redis_py

    r = redis_py.Redis.from_url(redis_url, decode_responses=True)
    k = ProjectKeys(project)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ask = json.dumps({"downloader": "drainer", "api_version": "2", "version": "1"}).encode()
    headers = {"Content-Type": "application/json"}
    names: list[str] = []
    empty = 0
    empty_at: list[float] = []
    starved_s = 0.0
    go.wait()
    t0 = time.perf_counter()
    while True:
        conn.request("POST", f"/{project}/multi={multi}/request", ask, headers)
        res = conn.getresponse()
        body = res.read()
        if res.status == 404:
            if items_waiting(r, k) == 0:
                break
            # Nothing handed out while items wait: on disk (or just refilled into the queue
            # after this claim ran, which it also waited for).
            empty += 1
            empty_at.append(round(time.perf_counter() - t0, 3))
            time.sleep(pause_s)
            starved_s += pause_s
            continue
        if res.status != 200:
            raise RuntimeError(f"claim answered {res.status}: {body[:200]!r}")
        got = json.loads(body)["item_name"].split("\0")
        names += got
        done = {
            "downloader": "drainer",
            "version": "1",
            "item": "\0".join(got),
            "bytes": {"data": 1},
            "id": {},
        }
        conn.request("POST", f"/{project}/done", json.dumps(done).encode(), headers)
        res = conn.getresponse()
        if (res.status, res.read()) != (200, b"OK"):
            raise RuntimeError(f"done answered {res.status}")
    report.put({"names": names, "empty": empty, "empty_at": empty_at, "starved_s": starved_s})


def http_drain(
    port: int,
    redis_url: str,
    project: str,
    clients: int,
    multi: int = DRAIN_MULTI,
    pause_s: float = EMPTY_PAUSE_S,
) -> dict:
    """Drain PROJECT through the server on PORT with CLIENTS processes (see _drain_client): every
    name handed out (a list, in no order), empty answers while items waited, seconds it took."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    go, report = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_drain_client, args=(port, redis_url, project, multi, pause_s, go, report))
        for _ in range(clients)
    ]
    for proc in procs:
        proc.start()
    t0 = time.perf_counter()
    go.set()
    parts = []
    for _ in procs:
        while True:
            try:
                parts.append(report.get(timeout=1))
                break
            except Exception:  # noqa: BLE001 - queue.Empty: is every client still alive?
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise RuntimeError("a drain client failed") from None
    seconds = time.perf_counter() - t0
    for proc in procs:
        proc.join()
    return {
        "names": [n for part in parts for n in part["names"]],
        "empty": sum(part["empty"] for part in parts),
        "empty_at_s": sorted(t for part in parts for t in part["empty_at"]),
        "starved_s": round(sum(part["starved_s"] for part in parts), 2),
        "seconds": seconds,
    }


def refill_drain_case(name: str, settings: dict, n_items: int, clients: int, bench: Bench) -> dict:
    """Load N_ITEMS into a project with SETTINGS, let `tracker maintain` offload them, then drain
    them all through `tracker serve` (see http_drain); the figures of the case."""
    from tracker_core.infra import processes

    tracker = str(Path(sys.executable).with_name("tracker"))
    k = ProjectKeys(P)
    tmp = bench.tmp
    server = bench.redis(f"redis-{name}")
    serve = maintain = None
    sampling = threading.Event()
    try:
        admin = AdminContext.from_url(server.url)
        r = admin.conn
        r.config_set("appendonly", "no")  # as the load and drain above: memory and throughput
        r.config_set("save", "")
        project_verbs.create(admin, P, {**settings, "done_mode": "offload", "log_maxlen": "1000"})
        bloom.configure(r, k, bloom.Geometry(capacity=max(n_items, 100_000)), replace=True)
        env = dict(os.environ, TRACKER_REDIS_URL=server.url)
        segments = tmp / f"segments-{name}"
        maintain = processes.start(
            [tracker, "--data-dir", str(tmp), "maintain", "--segments-dir", str(segments)],
            env=env,
            output=tmp / f"maintain-{name}.log",
        )
        loaded = load(server.url, k, n_items, 2)
        high = int(settings["offload_high"])
        processes.wait_for(lambda: r.scard(k.todo) <= high and not r.exists(k.offloading), 600, 0.1)
        offloaded = segment_registry.offloaded_count(r, k)
        port = free_port()
        serve = processes.start(
            [tracker, "serve", "--port", str(port)], env=env, output=tmp / f"serve-{name}.log"
        )
        processes.wait_for_port(port, serve)
        base_memory = int(r.info("memory")["used_memory"])
        # Redis memory, and what makes it: the queue (which refills keep under offload_high) and
        # the done set (which grows with the drain until the maintainer offloads it).
        peak = sample_peaks(
            sampling,
            0.05,
            memory=lambda: used_memory(r),
            todo=lambda: r.scard(k.todo),
            done=lambda: r.scard(k.done),
        )
        drained = http_drain(port, server.url, P, clients)
        sampling.set()
        seen = bytearray(n_items)
        twice = 0
        for item in drained["names"]:
            i = int(item, 16)
            twice += seen[i]
            seen[i] = 1
        stats = r.hgetall(k.stats)
    finally:
        sampling.set()
        processes.stop(serve)
        processes.stop(maintain)
    return {
        "settings": settings,
        "items": n_items,
        "offloaded_at_start": offloaded,
        "clients": clients,
        "multi": DRAIN_MULTI,
        "empty_answers": drained["empty"],
        "empty_answers_at_s": drained["empty_at_s"][:50],
        "seconds_after_empty_answers": drained["starved_s"],
        "drain_s": round(drained["seconds"], 2),
        "items_per_s": round(len(drained["names"]) / drained["seconds"]),
        "handed_out": len(drained["names"]),
        "handed_out_twice": twice,
        # The Bloom filter (1e-6 false positives) may drop a new name as already seen at load.
        "dropped_as_duplicate_at_load": loaded["seen"],
        "never_handed_out": loaded["new"] - sum(seen),
        "items_refilled": int(stats.get("items_refilled", 0)),
        "redis_used_memory_before_drain_mb": round(base_memory / 2**20, 1),
        "redis_used_memory_peak_in_drain_mb": round(peak["memory"] / 2**20, 1),
        "largest_todo_in_drain": peak["todo"],
        "largest_done_set_in_drain": peak["done"],
    }


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"  # runs made before the figure was kept have none


def refill_report(results: dict) -> str:
    lines = [
        "# Offloaded items drained through HTTP (issue 27)",
        "",
        "Written by the offload_refill case (benchmarks/cases/offload.py says what runs): a",
        "real `tracker serve` (default workers) and `tracker maintain` (default interval), clients",
        f"claiming multi={DRAIN_MULTI} and reporting each claim done as fast as they can; an empty",
        "answer is a 404 while items still waited, after which the client paused "
        f"{EMPTY_PAUSE_S * 1000:.0f} ms.",
        "The project has done_mode=offload: Redis's peak follows its done set, which `tracker",
        "maintain` offloads past done_offload_high (100,000) a fsynced segment at a time in its",
        "pass, and which a faster drain (on a busy disk) outgrows; the queue itself stays at",
        "offload_high at most (largest todo).",
        "",
        "| run | case | watermarks (high/low/segment) | items | clients | empty answers | s after them | items/s | Redis MB before / peak | largest todo / done set | once each |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    runs = {run["label"]: run for run in results["history"]} | {results["label"]: results}
    for label, run in runs.items():
        for name, c in run["cases"].items():
            s = c["settings"]
            marks = (
                f"{int(s['offload_high']):,}/{int(s['offload_low']):,}/{int(s['offload_segment_items']):,}"
            )
            once = c["handed_out_twice"] == 0 and c["never_handed_out"] == 0
            lines.append(
                f"| {label} ({run['commit']}) | {name} | {marks} | {c['items']:,} | {c['clients']} | "
                f"{c['empty_answers']:,} | {c['seconds_after_empty_answers']} | {c['items_per_s']:,} | "
                f"{c['redis_used_memory_before_drain_mb']} / {c['redis_used_memory_peak_in_drain_mb']} | "
                f"{_count(c.get('largest_todo_in_drain'))} / {_count(c.get('largest_done_set_in_drain'))} | "
                f"{'yes' if once else 'NO'} |"
            )
    lines += ["", "Commands:", ""]
    for label, run in runs.items():
        lines.append(f"- {label}: `{run['command']}`" + (f" ({run['note']})" if run.get("note") else ""))
    return "\n".join([*lines, "", provenance_line(results)]) + "\n"


def refill_history(previous: dict | None) -> list[dict]:
    """The earlier labelled runs, each with its command, date, commit and cases (a run of the
    same label replaces its earlier one)."""
    if previous is None:
        return []
    if "runs" in previous:  # written before the harness: {label: run}
        return [{"label": label, **run} for label, run in previous["runs"].items()]
    keep = ("label", "command", "date", "commit", "note", "cases")
    return [*previous.get("history", []), {k: previous[k] for k in keep if k in previous}]


@case("offload_refill", report=refill_report, history=refill_history)
def run_refill(bench: Bench) -> dict:
    """Offloaded items drained through real HTTP: empty answers, items/s, each item once."""
    names = bench.size("cases", list(REFILL_CASES), quick=["small"])
    n_items = bench.size("items", 1_000_000, quick=5_000)
    clients = bench.size("clients", 4, quick=2)
    figures = {}
    for name in names:
        figures[name] = refill_drain_case(name, REFILL_CASES[name], n_items, clients, bench)
        shown = {k: v for k, v in figures[name].items() if k != "empty_answers_at_s"}
        print(name, json.dumps(shown), flush=True)
    results = {"label": bench.size("label", "now"), "cases": figures}
    note = bench.size("note", "")
    if note:  # how the run was made, e.g. a tracker run from an older tree on PYTHONPATH
        results["note"] = note
    return results


@case("offload")
def run_offload(bench: Bench) -> dict:
    """Many short items loaded with offloading on, Redis memory under a budget, all drained in order."""
    total = bench.size("items", 50_000_000, quick=20_000)
    queue_budget_mb = bench.size("queue_budget_mb", 96.0)  # Redis memory allowed beyond the Bloom filter
    high = bench.size("high", 500_000, quick=5_000)
    low = bench.size("low", 100_000, quick=1_000)
    segment_items = bench.size("segment_items", 100_000, quick=1_000)
    done_mode = bench.size("done_mode", "offload")
    done_high = bench.size("done_high", 500_000, quick=5_000)
    loaders = bench.size("loaders", 2)
    multi = bench.size("multi", 1000, quick=100)
    maintain_interval = bench.size("maintain_interval", 1.0, quick=0.2)
    cli_items = bench.size("cli_items", CLI_SAMPLE, quick=2_000)
    k = ProjectKeys(P)
    tracker = str(Path(sys.executable).with_name("tracker"))
    tmp = str(bench.tmp)
    server = bench.redis()
    segments = Path(tmp) / "segments"
    maintain = None
    sampling = threading.Event()
    try:
        admin, engine = AdminContext.from_url(server.url), Engine(server.url)
        r = admin.conn
        # The data set: persistence off (the benchmark measures memory and throughput).
        r.config_set("appendonly", "no")
        r.config_set("save", "")
        cli_sample = cli_path_sample(server.url, cli_items)
        r.config_resetstat()
        base_mb = int(r.info("memory")["used_memory"]) / 2**20
        project_verbs.create(
            admin,
            P,
            {
                "offload_high": str(high),
                "offload_low": str(low),
                "offload_segment_items": str(segment_items),
                "done_mode": done_mode,
                "done_offload_high": str(done_high),
                "max_multi": str(multi),
                "log_maxlen": "1000",
            },
        )
        geometry = bloom.configure(r, k, bloom.Geometry(capacity=total), replace=True)
        bloom_bytes = geometry.bits_total() // 8
        budget = bloom_bytes + queue_budget_mb * 2**20

        peak_sampled = sample_peaks(sampling, 0.25, memory=lambda: used_memory(r))
        log = open(Path(tmp) / "maintain.log", "w")
        maintain = subprocess.Popen(
            [
                tracker,
                "--redis-url",
                server.url,
                "--data-dir",
                tmp,
                "maintain",
                "--segments-dir",
                str(segments),
                "--interval",
                str(maintain_interval),
            ],
            stdin=subprocess.DEVNULL,
            stderr=log,
        )

        t0 = time.perf_counter()
        loaded_counts = load(server.url, k, total, loaders)
        load_s = time.perf_counter() - t0
        load_scripts = script_time_us(r)
        # Let maintain bring todo down to the watermark before the drain starts.
        while r.scard(k.todo) > high or r.exists(k.offloading):
            time.sleep(0.1)
        loaded = census_verbs.status(admin, P)
        disk_bytes = sum(p.stat().st_size for p in (segments / P).iterdir())

        t0 = time.perf_counter()
        claimed = twice = starved = 0
        seen = bytearray(total)  # one byte per item: claimed exactly once?
        tenth = max(1, total // 10)
        position_sums = [0] * 11
        position_counts = [0] * 11
        in_order = True

        def todo_segments():
            return {n for n, q in segment_registry.segment_sources(r, k).items() if q == "todo"}

        known = todo_segments()
        calls = 0
        while True:
            status, items = engine.claim(P, "bench", "127.0.0.1", multi)
            calls += 1
            if status != 200:
                if segment_registry.offloaded_count(r, k) == 0 and r.scard(k.todo) == 0:
                    break
                starved += 1
                time.sleep(0.02)
                continue
            bucket = min(10, claimed // tenth)
            for name in items:
                i = int(name, 16)
                twice += seen[i]
                seen[i] = 1
                position_sums[bucket] += i
            position_counts[bucket] += len(items)
            claimed += len(items)
            engine.done(P, "bench", "1", items, [], "")
            if calls % 20 == 0:
                now = todo_segments()
                gone = known - now
                if gone and now and max(gone) > min(now):
                    in_order = False
                known = now
        drain_s = time.perf_counter() - t0
        while r.scard(k.done) > done_high or r.exists(k.offloading):
            time.sleep(0.1)  # the last done items go to disk
        final = census_verbs.status(admin, P)
        info = r.info("memory")
        peak = int(info["used_memory_peak"])
        maintain.terminate()
        maintain.wait(timeout=30)
        log.close()
        maintain_log = (Path(tmp) / "maintain.log").read_text().splitlines()
    finally:
        sampling.set()
        if maintain is not None and maintain.poll() is None:
            maintain.kill()
    per_item_script_us = None
    if load_scripts.get("evalsha"):
        per_item_script_us = round(load_scripts["evalsha"]["usec"] / total, 1)
    result = {
        "items": total,
        "watermarks": {
            "high": high,
            "low": low,
            "segment_items": segment_items,
            "done_mode": done_mode,
            "done_offload_high": done_high,
        },
        "bloom": {
            "capacity": geometry.capacity,
            "fp_rate": geometry.fp_rate,
            "layers": geometry.layers,
            "mb": round(bloom_bytes / 2**20, 1),
            "bytes_per_item": round(bloom_bytes / total, 2),
        },
        "budget_mb": round(budget / 2**20, 1),
        "budget_is": "Bloom filter + queue budget (queue_budget_mb)",
        "redis_used_memory_before_mb": round(base_mb, 1),
        "used_memory_peak_mb": round(peak / 2**20, 1),
        "used_memory_peak_sampled_mb": round(peak_sampled["memory"] / 2**20, 1),
        "used_memory_peak_beyond_bloom_mb": round((peak - bloom_bytes) / 2**20, 1),
        "under_budget": peak < budget,
        "after_load": {
            "todo": loaded["queues"]["todo"],
            "offloaded": loaded["offloaded"],
            "segments": loaded["segments"],
            "segment_bytes_on_disk": disk_bytes,
        },
        "load_s": round(load_s, 1),
        "load_items_per_s": round(total / load_s),
        "load_threads": loaders,
        "load_redis_script_us_per_item": per_item_script_us,
        "cli_path_items_per_s": cli_sample["items_per_s"],
        "drain_s": round(drain_s, 1),
        "drain_items_per_s": round(claimed / drain_s),
        "drain_claim_calls": calls,
        "drain_claims_starved": starved,
        "claimed": claimed,
        "claimed_twice": twice,
        "never_claimed": total - sum(seen),
        # The Bloom filter (1e-6 false positives) may drop a new name as already seen at load.
        "dropped_as_duplicate_at_load": loaded_counts["seen"],
        "segments_refilled_in_order": in_order,
        # Mean load position (0..1) of the items claimed in each tenth of the drain.
        "drain_mean_load_position_by_tenth": [
            round(s / c / total, 3) for s, c in zip(position_sums, position_counts) if c
        ],
        "left_after_drain": final["todo_total"] + final["offloaded"],
        "done_counter": final["done"],
        "done_after_drain": {"kept": final["done_kept"], "offloaded": final["done_offloaded"]},
        "maintain_log_lines": maintain_log[-5:],
    }
    result["headline"] = {
        "used_memory_peak_mb": result["used_memory_peak_mb"],
        "budget_mb": result["budget_mb"],
        "drain_items_per_s": result["drain_items_per_s"],
    }
    if bench.size("probes", False):  # where loading time goes, at 1 and at 6 filter layers
        result["load_probes"] = load_probes(
            bench.redis("redis-probes").url, bench.size("probe_items", 100_000)
        )
    return result
