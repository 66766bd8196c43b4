"""Serve the app with bjoern: N forked worker processes, each on its own listening socket.

Each worker builds its own Engine after the fork, so no Redis connection is shared between
processes. The parent restarts a worker that dies and stops them all on SIGTERM or SIGINT; a
worker whose parent dies (even by `kill -9`) exits too, so no orphan keeps the port.

bjoern has no timeouts, no body cap and spins on EMFILE: each worker runs it with bodies capped
as they are buffered (bodycap.py) and a guard thread beside it (connguard.py).

On TCP the parent binds one socket per worker on the same port with SO_REUSEPORT, and the
kernel spreads new connections over them by a hash of the client's address and port. With one
socket shared, whichever worker woke first took a burst of new connections: 64 keep-alive
connections opened at once (as HAProxy's pool to a node, or a load generator) ended up 52, 5,
4 and 3 on four workers, and the one holding 52 queued requests while the others idled (p99 of
`/request` 35-109 ms at 70% of the peak, the p99 benchmark case). The parent keeps every
socket open, so a restarted worker takes over its predecessor's socket and the connections
waiting in its queue. A Unix socket has no such spreading: its workers share one socket.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import signal
from dataclasses import dataclass, replace

import bjoern

from tracker_api.app import create_app, create_routes
from tracker_api.connections import bodycap
from tracker_api.connections.connguard import ConnectionGuard
from tracker_api.connections.worker_sockets import raise_nofile_limit
from tracker_api.public import public_cache, public_renderer, rendered_files, request_metrics
from tracker_api.web import errors, logs, redact
from tracker_api.web.config import AppConfig
from tracker_core.infra import processes
from tracker_core.infra.supervision import Backoff, Supervisor
from tracker_core.items.engine import Engine

log = logging.getLogger("tracker.server")

# The largest body any route takes (an admin item list as text, 64 MB) plus its form framing.
DEFAULT_MAX_BODY_BYTES = (64 << 20) + (64 << 10)

# A worker that dies is replaced at once; one that keeps dying within a second (say, libev's
# epoll_create failing at the descriptor limit) waits up to a second between tries, never spins.
WORKER_BACKOFF = dict(first_s=0.0, min_s=0.05, max_s=1.0, healthy_after_s=1.0)


# A bjoern worker serves one request at a time and computes only about 40% of a `/request`'s
# time; the rest it waits for Redis to run the claim script and answer, and with one worker per
# core that core idles meanwhile. More workers fill the wait with other requests' Python.
# benchmarks/results/capacity.md measures 1 to 8 workers on 2 cores (`make bench`); the choice is
# argued in docs/operations.md, "Sizing the API workers".
WORKERS_PER_CORE = 2


def default_workers(cores: int | None = None) -> int:
    """The --workers default: WORKERS_PER_CORE for each of CORES (this machine's by default)."""
    return WORKERS_PER_CORE * (cores or os.cpu_count() or 1)


@dataclass(frozen=True)
class Limits:
    """What a worker gives a connection: seconds of silence, seconds per request, body bytes."""

    idle_timeout_s: float = 30.0
    request_timeout_s: float = 60.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_budget_bytes: int = 2 * DEFAULT_MAX_BODY_BYTES  # all unfinished bodies of a worker


def make_app(redis_url: str, config: AppConfig, engine: Engine | None = None):
    """The app one worker serves, with its own Engine (built after the fork: no shared socket)."""
    if engine is None:
        engine = make_engine(redis_url, config)
    return create_app(engine, config=config)


def make_engine(redis_url: str, config: AppConfig) -> Engine:
    return Engine(redis_url, memory_guard_percent=config.memory_guard_percent)


def worker_pids(server_pid: int) -> list[int]:
    """The bjoern workers of `tracker serve` SERVER_PID: its children but the renderer."""
    return [pid for pid in processes.children_of(server_pid) if not _is_renderer(pid)]


def renderer_pid(server_pid: int) -> int | None:
    """The renderer of `tracker serve` SERVER_PID (tracker_api.public.public_renderer), or None."""
    return next((pid for pid in processes.children_of(server_pid) if _is_renderer(pid)), None)


def _is_renderer(pid: int) -> bool:
    return processes.process_name(pid) == public_renderer.PROCESS_NAME


def settle_heap() -> None:
    """Collect the start-up garbage, then move every object left (modules, the app, its Engine)
    out of the collector's sight for good (gc.freeze).

    A worker's heap after start-up is some 10^5 long-lived objects; the first full (generation 2)
    collections, a few seconds into serving, walked all of them and held the worker 40-70 ms each
    (measured with gc.callbacks under `--part p99`), while every request on its connections
    waited. Frozen, a full collection walks only what was made since.
    """
    gc.collect()
    gc.freeze()


LISTEN_BACKLOG = 4096  # per socket: connections the kernel queues for a worker while it is busy


def listening_sockets(host: str, port: int, workers: int) -> list:
    """One listening socket per worker: on TCP each its own on one port (SO_REUSEPORT; PORT 0
    picks a free port for all of them), on a Unix socket (host "unix:PATH") one shared by all."""
    if host.startswith("unix:"):
        return [bjoern.bind_and_listen(host, port, listen_backlog=LISTEN_BACKLOG)] * workers
    if port:
        # A port in use must still fail the start (EADDRINUSE), not let a second tracker of the
        # same user join this one's sockets and take a share of its connections: bind it once
        # without SO_REUSEPORT first.
        bjoern.bind_and_listen(host, port, listen_backlog=1).close()
    sockets = [bjoern.bind_and_listen(host, port, reuse_port=True, listen_backlog=LISTEN_BACKLOG)]
    try:
        port = sockets[0].getsockname()[1]
        for _ in range(workers - 1):
            sockets.append(bjoern.bind_and_listen(host, port, reuse_port=True, listen_backlog=LISTEN_BACKLOG))
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _renderer(sockets, redis_url: str, config: AppConfig) -> None:
    """The process that renders anonymous aggregates for the workers (tracker_api.public.public_renderer)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sock in set(sockets):  # it serves no connection: the listening sockets are the workers'
        sock.close()
    assert config.public_cache_dir is not None  # started only with a cache directory
    engine = make_engine(redis_url, config)
    app = create_routes(engine, config=replace(config, public_cache_dir=None))
    settle_heap()
    renderer = public_renderer.Renderer(
        rendered_files.Store(config.public_cache_dir), app, config.public_cache_max_age_s
    )
    renderer.run_forever(warm=public_cache.warm_keys())


def _worker(sock, others, redis_url: str, config: AppConfig, limits: Limits) -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in others:  # the other workers' sockets, inherited: this worker never accepts there
        if other is not sock:
            other.close()
    engine = make_engine(redis_url, config)
    app = make_app(redis_url, config, engine)
    if config.public_cache_dir is not None:
        store = rendered_files.Store(config.public_cache_dir)
        if not public_cache.wait_warm(store, public_cache.warm_keys()):
            log.warning("the renderer has not rendered the front page and /metrics: serving anyway")
    settle_heap()
    guard = ConnectionGuard(
        sock, limits.idle_timeout_s, limits.request_timeout_s, limits.max_body_bytes
    ).start()
    # The body cap refuses some requests before the app sees them: counted as the app would.
    count = functools.partial(errors.count_refusal, engine)
    bodycap.run_capped(sock, app, limits.max_body_bytes, limits.body_budget_bytes, guard, count)


def serve(
    redis_url: str,
    host: str,
    port: int,
    workers: int,
    config: AppConfig = AppConfig(),
    ready=None,
    limits: Limits = Limits(),
) -> None:
    """Bind HOST:PORT and run WORKERS bjoern processes until SIGTERM/SIGINT; READY(port) once
    they listen."""
    redact.install()  # tracebacks and bjoern's own prints do not pass through logging
    logs.ensure_setup()
    raise_nofile_limit()
    sockets = listening_sockets(host, port, workers)
    # The workers' request metrics: one directory per run, made before they fork.
    _, remove_metrics_directory = request_metrics.prepare_multiprocess_directory()
    # The renderer's files, which every worker reads: also one directory per run.
    cache_directory, remove_cache_directory = rendered_files.prepare_directory()
    config = replace(config, public_cache_dir=cache_directory)
    supervisor = Supervisor(log=log.warning)
    supervisor.stop_on_signals()
    try:
        supervisor.add(
            "renderer",
            request_metrics.marking_dead(
                lambda: processes.fork(
                    lambda: _renderer(sockets, redis_url, config), name=public_renderer.PROCESS_NAME
                )
            ),
            Backoff(**WORKER_BACKOFF),
        )
        for sock in sockets:
            # SIGKILL when the parent dies: a worker must never outlive it and hold the port.
            def spawn_worker(sock=sock) -> int:
                return processes.fork(lambda: _worker(sock, sockets, redis_url, config, limits))

            supervisor.add("worker", request_metrics.marking_dead(spawn_worker), Backoff(**WORKER_BACKOFF))
        log.info(
            "serving on http://%s:%s with %d worker(s), Redis %s",
            host,
            sockets[0].getsockname()[1],
            workers,
            redis_url,  # redacted by the record factory (logs.py)
        )
        if ready is not None:
            ready(sockets[0].getsockname()[1])
        supervisor.run()
    finally:
        supervisor.stop_all()
        for sock in set(sockets):
            sock.close()
        remove_metrics_directory()
        remove_cache_directory()
