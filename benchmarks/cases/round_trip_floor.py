"""What one synchronous Redis round trip costs on this machine, before any tracker work.

A bjoern worker serves one request at a time and makes one round trip to Redis per `/request`
or `/done`: it writes the command, sleeps in recv() until Redis answers, and wakes. Redis, when
no other client keeps it busy, sleeps in epoll between commands and wakes for each. Both wake-ups
cost CPU that no code of ours runs, and on a virtual machine they cost much more than on bare
metal. This measures that floor with the cheapest command there is (PING), from a raw Python
socket (as tracker_core.infra.rawredis talks to Redis: blocking, TCP_NODELAY):

- one client, one PING at a time, over loopback TCP and over a Unix socket: the client's CPU
  (user and system, getrusage) and Redis's (`INFO cpu`) per round trip;
- K client processes at once, each one PING at a time: Redis's CPU per PING when its event loop
  finds several sockets ready per wake-up (as under several busy workers);
- one client over TCP, a script that keeps Redis busy a while before it answers (a Lua loop of
  N steps, N in BUSY_STEPS): the client's CPU per round trip against Redis's own time per call,
  which says whether a worker pays for the time a script takes (a longer sleep in recv() might
  cost more to wake from on a virtual CPU) or only for the round trip.

Compare with benchmarks/results/cpu.md: worker CPU per `/request` minus this client floor minus
the hello-world's HTTP floor is the tracker's own Python; Redis CPU per `/request` minus this
Redis floor is about the claim script's own time.

Writes results/round_trip_floor.json and .md.
"""

from __future__ import annotations

import multiprocessing
import resource
import socket
import time

import hiredis
import redis

from cpu_bench.meters import redis_cpu_s
from harness import Bench, case
from harness.results import provenance_line

PING = b"*1\r\n$4\r\nPING\r\n"
PONG = b"+PONG\r\n"
BUSY_SCRIPT = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"
BUSY_STEPS = (0, 5_000, 20_000, 50_000)  # Lua loop steps: from a PING's cost to ~100 µs here


def connect(address) -> socket.socket:
    if isinstance(address, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
    else:
        sock = socket.create_connection(address)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def ping(sock: socket.socket, count: int, command: bytes = PING, reply: bytes = PONG) -> None:
    for _ in range(count):
        sock.sendall(command)
        if sock.recv(64) != reply:  # one short reply: it always comes in one piece here
            raise RuntimeError(f"unexpected reply to {command[:40]!r}")


def one_client(address, admin, pings: int, command: bytes = PING, reply: bytes = PONG) -> dict:
    """Per round trip of COMMAND: the client's user and system CPU, Redis's CPU, the wall time
    (µs)."""
    sock = connect(address)
    try:
        ping(sock, min(1000, pings), command, reply)  # warm up: connection set up, caches
        before, redis_before, wall = (
            resource.getrusage(resource.RUSAGE_SELF),
            redis_cpu_s(admin),
            time.perf_counter(),
        )
        ping(sock, pings, command, reply)
        wall = time.perf_counter() - wall
        after, redis_after = resource.getrusage(resource.RUSAGE_SELF), redis_cpu_s(admin)
    finally:
        sock.close()
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "client_cpu_us": round((user + system) / pings * 1e6, 2),
        "client_user_us": round(user / pings * 1e6, 2),
        "client_system_us": round(system / pings * 1e6, 2),
        "redis_cpu_us": round((redis_after - redis_before) / pings * 1e6, 2),
        "wall_us": round(wall / pings * 1e6, 2),
        "pings": pings,
    }


def busy_redis(address, admin, calls: int) -> list[dict]:
    """One client, one script call at a time, for each loop length of BUSY_STEPS: the client's
    CPU per round trip beside the script's own time (`INFO commandstats`, µs per call)."""
    sha = admin.script_load(BUSY_SCRIPT)
    rows = []
    for steps in BUSY_STEPS:
        command = hiredis.pack_command(("EVALSHA", sha, 0, steps))
        admin.config_resetstat()
        figures = one_client(address, admin, calls, command, b":1\r\n")
        stats = admin.info("commandstats")["cmdstat_evalsha"]
        rows.append({"loop_steps": steps, "script_us": round(stats["usec_per_call"], 2), **figures})
    return rows


def _pinger(address, seconds: float, start, counts) -> None:
    sock = connect(address)
    start.wait()
    done, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        ping(sock, 100)
        done += 100
    counts.put(done)
    sock.close()


def many_clients(address, admin, clients: int, seconds: float) -> dict:
    """Redis's CPU per PING while CLIENTS processes ping it at once for SECONDS."""
    context = multiprocessing.get_context("fork")
    start, counts = context.Event(), context.Queue()
    workers = [
        context.Process(target=_pinger, args=(address, seconds, start, counts)) for _ in range(clients)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.2)  # every client connected
    before = redis_cpu_s(admin)
    start.set()
    total = sum(counts.get(timeout=seconds + 30) for _ in workers)
    redis_s = redis_cpu_s(admin) - before
    for worker in workers:
        worker.join()
    return {
        "clients": clients,
        "pings": total,
        "pings_per_s": round(total / seconds),
        "redis_cpu_us": round(redis_s / total * 1e6, 2),
    }


@case("round_trip_floor", report=lambda result: markdown(result))
def run(bench: Bench) -> dict:
    """CPU of one synchronous Redis round trip (PING), client and Redis, TCP and Unix socket."""
    pings = bench.size("pings", 50_000, quick=2_000)
    clients = bench.size("clients", 8, quick=2)
    seconds = bench.size("seconds", 5.0, quick=0.5)
    server = bench.redis(aof=False, unix=True)
    admin = redis.Redis.from_url(server.url)
    tcp, unix = ("127.0.0.1", server.port), str(server.socket_path)
    figures = {
        "one_client_tcp": one_client(tcp, admin, pings),
        "one_client_unix": one_client(unix, admin, pings),
        "many_clients_tcp": many_clients(tcp, admin, clients, seconds),
        "busy_redis_tcp": busy_redis(tcp, admin, max(1, pings // 5)),
    }
    headline = {
        "client_cpu_us_tcp": figures["one_client_tcp"]["client_cpu_us"],
        "redis_cpu_us_tcp": figures["one_client_tcp"]["redis_cpu_us"],
    }
    return {"what": __doc__.splitlines()[0], "figures": figures, "headline": headline}


def markdown(result: dict) -> str:
    f = result["figures"]
    one_tcp, one_unix, many = f["one_client_tcp"], f["one_client_unix"], f["many_clients_tcp"]
    return "\n".join(
        [
            "# The floor of one synchronous Redis round trip",
            "",
            f"{provenance_line(result)} PING from a raw Python socket, one "
            "at a time; client CPU from getrusage, Redis CPU from `INFO cpu` (AOF off).",
            "",
            "| case | client CPU µs (user + system) | Redis CPU µs | wall µs per PING |",
            "| --- | ---: | ---: | ---: |",
            f"| one client, TCP loopback | {one_tcp['client_cpu_us']} ({one_tcp['client_user_us']} + "
            f"{one_tcp['client_system_us']}) | {one_tcp['redis_cpu_us']} | {one_tcp['wall_us']} |",
            f"| one client, Unix socket | {one_unix['client_cpu_us']} ({one_unix['client_user_us']} + "
            f"{one_unix['client_system_us']}) | {one_unix['redis_cpu_us']} | {one_unix['wall_us']} |",
            f"| {many['clients']} clients at once, TCP ({many['pings_per_s']:,} PING/s) | | "
            f"{many['redis_cpu_us']} | |",
            "",
            "A `/request` makes one such round trip: its worker CPU cannot fall below the hello-world's "
            "(HTTP) plus the client floor here, nor its Redis CPU below the Redis floor plus the claim "
            "script's own time, while one worker sends one command at a time. With several busy "
            "clients Redis wakes less often per command, which is the many-clients row.",
            "",
            "## The client's CPU while Redis is busy before it answers",
            "",
            "One client over TCP, one call at a time of a script that loops N steps before it "
            "answers; the script's own time from `INFO commandstats`.",
            "",
            "| loop steps | script's own time µs | client CPU µs | Redis CPU µs | wall µs per call |",
            "| ---: | ---: | ---: | ---: | ---: |",
            *(
                f"| {row['loop_steps']:,} | {row['script_us']} | {row['client_cpu_us']} | "
                f"{row['redis_cpu_us']} | {row['wall_us']} |"
                for row in f["busy_redis_tcp"]
            ),
            "",
            "The client runs the same code in every row: any difference between the rows is the "
            "cost of waiting longer for the answer, not of the client's own work.",
            "",
        ]
    )
