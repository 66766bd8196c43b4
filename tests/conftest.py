"""Fixtures: a real redis-server on a free port, both protocol implementations, a live server."""

from __future__ import annotations

import pytest
import redis
from falcon import testing

from support import twins as twins_support
from support.processes import start_live_server, stop_live_server
from tracker_api.app import create_app
from tracker_core import bloom, limits, protocol, twins
from tracker_core.admin.context import AdminContext
from tracker_core.embedded import EmbeddedRedis, free_port
from tracker_core.engine import Engine

PROTOCOL_FUNCTIONS = ("valid_downloader", "version_key", "version_older", "split_items", "flatten_bytes")


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
    """An AdminContext for the admin verbs (tracker_core.admin), acting as the CLI does."""
    return AdminContext.from_url(redis_url)


@pytest.fixture(params=["compiled", "pure"])
def implementation(request, monkeypatch):
    """Run the test once over every compiled hot-path module (protocol, classify, bloom) and once
    over their pure twins, whichever TRACKER_PURE_PYTHON picked at import."""
    variants = {name: twins.both(name) for name in twins_support.HOT_PATH_MODULES}
    if any(request.param not in found for found in variants.values()):
        pytest.skip("built without extensions (TRACKER_NO_EXTENSIONS=1)")
    chosen = {name: found[request.param] for name, found in variants.items()}
    for name in PROTOCOL_FUNCTIONS:
        monkeypatch.setattr(protocol, name, getattr(chosen["protocol"], name))
    monkeypatch.setattr(limits, "Classifier", chosen["classify"].Classifier)
    monkeypatch.setattr(bloom, "script_args", chosen["bloom"].script_args)
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


@pytest.fixture
def live_server(redis_url):
    """The real server: `tracker serve` with two bjoern workers on a free loopback port."""
    server = start_live_server(redis_url)
    yield server
    stop_live_server(server)
