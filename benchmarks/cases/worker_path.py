"""Worker CPU per /request and per /done through the app, with and without the hot path.

Calls the WSGI app in this process (as a bjoern worker does, without bjoern's own parsing and
writing) against a private Redis that listens on loopback TCP and on a Unix socket, and takes
the process CPU time (user + system: the Redis round trip's system calls included) and Redis's
own CPU (`INFO cpu`) per request. Variants, measured in alternating rounds:

- ``falcon``: the Falcon app alone (the path every request took before tracker_api.warrior_api.hot_path);
- ``hot``: the app as create_app returns it (the hot routes answered by tracker_api.warrior_api.hot_path);
- each over ``tcp`` (redis://127.0.0.1) and ``unix`` (unix:///.../redis.sock).

Then the same app in one bjoern process (the worker's wrappers: bodycap and the connection
guard) under wrk keep-alive (benchmarks/wrk/request.lua, 4 connections), in alternating rounds
beside the hello-world app (server_bench/hello_app.py): with Engine.claim stubbed (no Redis: what
the HTTP side costs) and with Redis over TCP and over the Unix socket. Worker CPU from /proc.

Writes results/worker_path.json and .md (medians over the rounds).
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import time
from pathlib import Path

import redis

from cpu_bench.meters import process_cpu_s, redis_cpu_s
from harness import Bench, case
from harness.results import provenance_line
from server_bench.plan import BENCHMARKS
from server_bench.wrk import run_wrk
from tracker_api.app import create_app
from tracker_api.connections import bodycap
from tracker_api.connections.connguard import ConnectionGuard
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.processes import children_of, free_port, start, stop, wait_for, wait_for_port
from tracker_core.items.engine import Engine

PROJECT = "bench"
DOWNLOADERS = [f"warrior0-{n}" for n in range(500)]  # as benchmarks/wrk/request.lua spreads them


def environ(path: str, body: bytes) -> dict:
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        "HTTP_USER_AGENT": "ArchiveTeam Warrior/0.10.3 Standalone",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.errors": sys.stderr,
    }


def request_body(n: int) -> bytes:
    return b'{"downloader":"%s","api_version":"2","version":"20240101.01"}' % DOWNLOADERS[n % 500].encode()


def done_body(downloader: str, item: str) -> bytes:
    return (
        b'{"downloader":"%s","version":"20240101.01","item":"%s","bytes":{"data":1048576},'
        b'"id":{"sha1":"bench"}}' % (downloader.encode(), item.encode())
    )


def run(app, calls: list[tuple[str, bytes]]) -> tuple[float, dict]:
    """Process CPU seconds for CALLS through APP, and the statuses seen."""
    statuses: dict = {}

    def start_response(status, headers, exc_info=None):
        statuses[status] = statuses.get(status, 0) + 1

    envs = [environ(path, body) for path, body in calls]
    started = time.process_time()
    for env in envs:
        b"".join(app(env, start_response))
    return time.process_time() - started, statuses


def serve_one(port: int, redis_url: str, stub: bool) -> None:
    """One bjoern process serving the app as a worker does (bodycap and the guard around it);
    STUB: Engine.claim answers one fixed item without Redis."""
    import bjoern

    engine = Engine(redis_url)
    if stub:
        engine.claim = lambda project, downloader, ip, wanted: (200, ["item-123456"])
    sock = bjoern.bind_and_listen("127.0.0.1", port, listen_backlog=4096)
    guard = ConnectionGuard(sock, 30.0, 60.0, 64 << 20).start()
    bodycap.run_capped(sock, create_app(engine), 64 << 20, 128 << 20, guard)


def bjoern_rounds(urls: dict, rounds: int, seconds: int, scratch: Path) -> dict:
    """Worker CPU per /request of each server, wrk in alternating rounds."""
    log = scratch / "servers.log"
    servers = {}
    try:
        for name, argv in {
            "hello-world": [str(BENCHMARKS / "server_bench" / "hello_app.py"), "{port}", "1"],
            "hot, Redis stubbed": ["-m", "cases.worker_path", "{port}", urls["tcp"], "--stub"],
            "hot, Redis over tcp": ["-m", "cases.worker_path", "{port}", urls["tcp"]],
            "hot, Redis over unix": ["-m", "cases.worker_path", "{port}", urls["unix"]],
        }.items():
            port = free_port()
            env = dict(
                os.environ, PYTHONPATH=os.pathsep.join([str(BENCHMARKS), os.environ.get("PYTHONPATH", "")])
            )
            process = start([sys.executable, *(a.format(port=port) for a in argv)], env=env, output=log)
            wait_for_port(port, process)
            pid = process.pid
            if name == "hello-world":  # it forks its worker: measure the child, not the supervisor
                wait_for(lambda parent=pid: children_of(parent), 10)
                pid = children_of(pid)[0]
            servers[name] = (process, port, pid)
        samples = {name: [] for name in servers}
        for _ in range(rounds):
            for name, (_, port, pid) in servers.items():
                before = process_cpu_s(pid)
                figures = run_wrk(
                    f"http://127.0.0.1:{port}/{PROJECT}/request", "request.lua", 4, seconds, False
                )
                samples[name].append(
                    ((process_cpu_s(pid) - before) / figures["requests"] * 1e6, figures["requests_per_s"])
                )
        return {
            name: {
                "worker_cpu_us": round(statistics.median(c for c, _ in rows), 1),
                "requests_per_s": round(statistics.median(r for _, r in rows)),
                "worker_cpu_us_rounds": [round(c, 1) for c, _ in rows],
            }
            for name, rows in samples.items()
        }
    finally:
        for process, _, _ in servers.values():
            stop(process)


@case("worker_path", report=lambda result: markdown(result), needs=("wrk",))
def run_case(bench: Bench) -> dict:
    """Worker CPU per /request and /done through the app, with and without the hot path."""
    rounds = bench.size("rounds", 7, quick=1)
    per_round = bench.size("requests", 3000, quick=100)
    seconds = bench.size("seconds", 3, quick=1)
    server = bench.redis(aof=False, unix=True)
    urls = {"tcp": server.url, "unix": f"unix://{server.socket_path}"}
    admin = AdminContext.from_url(server.url)
    project_verbs.create(admin, PROJECT)
    # Every request round claims per_round items; every done round first claims per_round.
    needed = per_round * rounds * 4 * 2 + 2000
    for first in range(0, needed, 100_000):
        item_verbs.add(admin, PROJECT, [f"item-{i}" for i in range(first, min(needed, first + 100_000))])
    apps = {}
    for transport, url in urls.items():
        full = create_app(Engine(url), admin=admin)
        apps[("falcon", transport)] = full.falcon_app
        apps[("hot", transport)] = full
    admin_conn = redis.Redis.from_url(server.url)
    claimer = Engine(server.url)
    samples: dict = {}
    serial = 0
    for app in apps.values():  # warm up: settings cached, scripts loaded
        run(app, [(f"/{PROJECT}/request", request_body(n)) for n in range(200)])
    for round_no in range(rounds):
        for key, app in apps.items():
            calls = [(f"/{PROJECT}/request", request_body(serial + n)) for n in range(per_round)]
            serial += per_round
            before = redis_cpu_s(admin_conn)
            cpu, statuses = run(app, calls)
            redis_s = redis_cpu_s(admin_conn) - before
            samples.setdefault(("request",) + key, []).append((cpu, redis_s, statuses))
            dones = []
            for n in range(per_round):
                downloader = DOWNLOADERS[n % 500]
                status, names = claimer.claim(PROJECT, downloader, "127.0.0.1", 1)
                if status == 200:
                    dones.append((f"/{PROJECT}/done", done_body(downloader, names[0])))
            before = redis_cpu_s(admin_conn)
            cpu, statuses = run(app, dones)
            redis_s = redis_cpu_s(admin_conn) - before
            samples.setdefault(("done",) + key, []).append(
                (cpu / len(dones) * per_round, redis_s / len(dones) * per_round, statuses)
            )
        print(f"round {round_no + 1}/{rounds}", flush=True)
    figures = {}
    for (path, variant, transport), measured in samples.items():
        figures[f"{path}/{variant}/{transport}"] = {
            "worker_cpu_us": round(statistics.median(c for c, _, _ in measured) / per_round * 1e6, 2),
            "redis_cpu_us": round(statistics.median(r for _, r, _ in measured) / per_round * 1e6, 2),
            "worker_cpu_us_rounds": [round(c / per_round * 1e6, 1) for c, _, _ in measured],
            "statuses": measured[-1][2],
        }
    # Enough items for every bjoern round's claims too (about 5k/s at most per server).
    extra = int(5000 * seconds * rounds * 2) + 1000
    for start_at in range(needed, needed + extra, 100_000):
        item_verbs.add(
            admin,
            PROJECT,
            [f"item-{i}" for i in range(start_at, min(needed + extra, start_at + 100_000))],
        )
    in_bjoern = bjoern_rounds(urls, rounds, seconds, bench.tmp)
    return {
        "what": __doc__.splitlines()[0],
        "rounds": rounds,
        "requests_per_round": per_round,
        "figures": figures,
        "bjoern_seconds_per_round": seconds,
        "bjoern": in_bjoern,
        "headline": {
            k: figures[k]["worker_cpu_us"] for k in ("request/hot/tcp", "done/hot/tcp") if k in figures
        },
    }


def markdown(result: dict) -> str:
    lines = [
        "# Worker CPU per request through the app (in process, no bjoern)",
        "",
        f"{provenance_line(result)} Medians of {result['rounds']} alternating "
        f"rounds of {result['requests_per_round']} requests. Worker: process CPU (user + system, the "
        "Redis round trip's system calls included); Redis: `INFO cpu`.",
        "",
        "| case | path | Redis via | worker CPU µs | Redis CPU µs |",
        "|---|---|---|---:|---:|",
    ]
    for name, f in result["figures"].items():
        case, variant, transport = name.split("/")
        lines.append(f"| /{case} | {variant} | {transport} | {f['worker_cpu_us']} | {f['redis_cpu_us']} |")
    lines += [
        "",
        "## In one bjoern process under wrk (POST /request, 4 keep-alive connections)",
        "",
        f"Medians of {result['rounds']} alternating rounds of {result['bjoern_seconds_per_round']} s; "
        "worker CPU from /proc (the forked worker of the hello-world app). The stubbed Engine.claim "
        "answers one fixed item: what the HTTP side costs.",
        "",
        "| server | worker CPU µs | req/s |",
        "|---|---:|---:|",
    ]
    for name, f in result["bjoern"].items():
        lines.append(f"| {name} | {f['worker_cpu_us']} | {f['requests_per_s']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # one bjoern process of bjoern_rounds: PORT REDIS_URL [--stub]
    serve_one(int(sys.argv[1]), sys.argv[2], "--stub" in sys.argv[3:])
