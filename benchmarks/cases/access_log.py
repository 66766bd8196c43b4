"""What the access log costs a request: CPU per WSGI call with tracker.access on and off.

The wrapper of tracker_api.web.access_log goes around a WSGI app that answers at once, so what is
timed is the wrapper alone: the status capture, the path clean-up, the client address, and
logging's record (formatted and redacted as it is made, logs.py) written through the handler
to /dev/null (the cost of the journal or a disk is the operator's, and varies). Three paths
alternate: a warrior claim, a backfeed post (its secret redacted) and an item status with a
URL in it. Off, ``wrap`` returns the app itself: the "off" figure is the bare call.

CPU time (process_time), best of 3 rounds of CALLS calls each, on and off alternating so a noisy
shared machine hits both alike. About 10 s of CPU (results/access_log.json).
"""

from __future__ import annotations

import os
import time

from harness import Bench, case
from tracker_api.web import access_log, logs

PATHS = (
    "/demo/multi=3/request",
    "/backfeed/legacy/demo-0123456789abcdef0123",
    "/demo/items/https://example.com/page?id=42&q=a b.json",
)
ROUNDS = 3


def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b"{}"]


def environs() -> list[dict]:
    return [
        {"REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "REMOTE_ADDR": "192.0.2.7"}
        for path in PATHS
    ]


def start_response(status, headers, exc_info=None):
    return None


def time_calls(wsgi, calls: int) -> float:
    """CPU seconds for CALLS requests through WSGI."""
    envs = environs()
    count = len(envs)
    started = time.process_time()
    for i in range(calls):
        wsgi(envs[i % count], start_response)
    return time.process_time() - started


@case("access_log")
def run(bench: Bench) -> dict:
    """Worker CPU per request of the access log: on against off."""
    calls = bench.size("calls", 100_000, quick=2_000)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the whole run
    logs.setup("info", access_log=False, stream=devnull)
    off = access_log.wrap(app)
    logs.setup("info", access_log=True, stream=devnull)
    on = access_log.wrap(app)
    assert off is app and on is not app
    best = {"off": float("inf"), "on": float("inf")}
    for _ in range(ROUNDS):
        best["off"] = min(best["off"], time_calls(off, calls))
        best["on"] = min(best["on"], time_calls(on, calls))
    us = {name: seconds / calls * 1e6 for name, seconds in best.items()}
    return {
        "calls_per_round": calls,
        "rounds": ROUNDS,
        "paths": list(PATHS),
        "cpu_us_per_request_off": round(us["off"], 2),
        "cpu_us_per_request_on": round(us["on"], 2),
        "access_log_cpu_us_per_request": round(us["on"] - us["off"], 2),
        "headline": {"access_log_cpu_us_per_request": round(us["on"] - us["off"], 2)},
        "note": "best of the rounds; the handler writes to /dev/null (a journal or a disk costs "
        "more, in another process); compare with the server's peak of ~4,400 claims/s on 2 "
        "cores in benchmarks/results/server.json",
    }
