"""Fixtures: a real redis-server on a free port, both protocol implementations, a live server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from falcon import testing

from tracker_api.app import create_app
from tracker_core import _protocol_py, protocol
from tracker_core.admin import Admin
from tracker_core.embedded import EmbeddedRedis, free_port
from tracker_core.engine import Engine

PROTOCOL_FUNCTIONS = ("valid_downloader", "version_key", "version_older", "split_items", "flatten_bytes")
ROOT = Path(__file__).resolve().parent.parent
TRACKER_BIN = Path(sys.executable).with_name("tracker")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), port=free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """A clean database for each test."""
    redis.Redis.from_url(redis_server.url).flushall()
    return redis_server.url


@pytest.fixture
def r(redis_url):
    return redis.Redis.from_url(redis_url, decode_responses=True)


@pytest.fixture
def admin(redis_url):
    return Admin.from_url(redis_url)


def _compiled_module():
    try:
        from tracker_core import _protocol_c
    except ImportError:
        return None
    return _protocol_c


@pytest.fixture(params=["compiled", "pure"])
def implementation(request, monkeypatch):
    """Run the test once over the compiled protocol module and once over its pure twin."""
    if request.param == "compiled":
        module = _compiled_module()
        if module is None:
            pytest.skip("built without extensions (TRACKER_NO_EXTENSIONS=1)")
    else:
        module = _protocol_py
    for name in PROTOCOL_FUNCTIONS:
        monkeypatch.setattr(protocol, name, getattr(module, name))
    return request.param


class Clock:
    """A settable clock for the engine, in seconds."""

    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def engine(redis_url, clock):
    return Engine(redis_url, clock=clock)


@pytest.fixture
def client(engine, implementation):
    """falcon's test client over the app, once per protocol implementation."""
    return testing.TestClient(create_app(engine))


def wait_for_port(port: int, timeout_s: float = 15.0, process=None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class LiveServer:
    def __init__(self, process, port):
        self.process = process
        self.port = port
        self.base = f"http://127.0.0.1:{port}"


def start_live_server(redis_url: str, workers: int = 2, extra_env: dict | None = None) -> LiveServer:
    port = free_port()
    env = dict(os.environ, TRACKER_REDIS_URL=redis_url, **(extra_env or {}))
    process = subprocess.Popen(
        [str(TRACKER_BIN), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    wait_for_port(port, process=process)
    return LiveServer(process, port)


def stop_process(process: subprocess.Popen, timeout_s: float = 10) -> None:
    """SIGTERM PROCESS and wait; SIGKILL it if it has not exited after TIMEOUT_S."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_live_server(server: LiveServer) -> None:
    stop_process(server.process)


@pytest.fixture
def live_server(redis_url):
    """The real server: `tracker serve` with two bjoern workers on a free loopback port."""
    server = start_live_server(redis_url)
    yield server
    stop_live_server(server)
