"""Fixtures: a real redis-server on a free port, both protocol implementations, a live server."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from falcon import testing
from hypothesis import HealthCheck, settings

from support import twins as twins_support
from support.processes import start_live_server, stop_live_server
from tracker_api.app import create_app
from tracker_core.admin.context import AdminContext
from tracker_core.compiled import twins
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine

TESTS = Path(__file__).resolve().parent
pytest_plugins = ["support.fixtures"]  # the app client and the CLI, for the files that use them

# `make test` runs the suite on two workers beside the servers, Redis and browsers other tests
# start: a property's examples are judged by what they assert, not by how fast a loaded machine
# ran them.
settings.register_profile("tracker", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tracker")


def pytest_collection_modifyitems(config, items):
    """Mark `twins` the tests of the files listed in support.twins.TWIN_TESTS: `make test` runs
    them a second time on the pure-Python twins. Not those that run the same whatever
    TRACKER_PURE_PYTHON says (support.twins.same_in_both_runs): the compiled variant of a test
    parametrized by variant, and a test that calls both twins itself (the agreement tests).

    On a pytest-xdist worker (`make test` deals out whole files, in this order), the files with
    `slow` tests come first: the longest start at once and the short ones fill in at the end."""
    listed = twins_support.twin_test_files()
    for item in items:
        if _relative(item.path) in listed and not twins_support.same_in_both_runs(item):
            item.add_marker(pytest.mark.twins)
    if hasattr(config, "workerinput"):
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)  # stable: each file in order


class TwinsProbe:
    """In the twins run (TRACKER_PURE_PYTHON=1, -m twins): which listed files reached which pure
    twins, so that a file listed for a module that no longer reaches it fails the run. Over
    pytest-xdist each worker judges the files it ran (whole files: --dist loadfile) and the
    controller reports what they found (``from_workers``)."""

    def __init__(self):
        self.current = None
        self.reached: dict[str, set[str]] = {}
        self.ran: set[str] = set()
        self.from_workers: list[str] = []
        twins_support.install_probe(self.record)

    def record(self, name: str) -> None:
        if self.current is not None:
            self.reached.setdefault(self.current, set()).add(name)

    def missing(self) -> list[str]:
        return self.from_workers + [
            f"{path} never reached the pure {name} twin"
            for name, paths in twins_support.TWIN_TESTS.items()
            for path in paths
            if path in self.ran and name not in self.reached.get(path, ())
        ]


def _relative(path: Path) -> str | None:
    return path.relative_to(TESTS).as_posix() if path.is_relative_to(TESTS) else None


_probe: list[TwinsProbe] = []  # the twins run's, once configured


def pytest_configure(config):
    selected = config.getoption("markexpr", "") or ""
    if twins.pure_requested() and "twins" in selected and not config.getoption("keyword", ""):
        _probe.append(TwinsProbe())


def pytest_runtest_setup(item):
    for probe in _probe:
        probe.current = _relative(item.path)


def pytest_runtest_makereport(item, call):
    for probe in _probe:
        if call.when == "call" and call.excinfo is None:
            probe.ran.add(_relative(item.path))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: a worker is done; keep what its twins probe found missing."""
    for probe in _probe:
        probe.from_workers += getattr(node, "workeroutput", {}).get("twins_missing", [])


def pytest_sessionfinish(session):
    probe = _probe[0] if _probe else None
    if probe is not None and hasattr(session.config, "workeroutput"):  # a worker: to the controller
        session.config.workeroutput["twins_missing"] = probe.missing()
    elif probe is not None and probe.missing():
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_sep("=", "twins run: a listed file does not reach its twin", red=True)
        for line in probe.missing():
            reporter.write_line(f"twins run: {line} (support/twins.py TWIN_TESTS)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
    over their pure twins, whichever TRACKER_PURE_PYTHON picked at import: every name the tracker
    bound from a twin module (the facade's functions, limits.Classifier...) is swapped."""
    variants = {name: twins.both(name) for name in twins_support.HOT_PATH_MODULES}
    if any(request.param not in found for found in variants.values()):
        pytest.skip("built without extensions (TRACKER_NO_EXTENSIONS=1)")
    swapped = twins_support.swap_to(request.param, variants, monkeypatch)
    assert {name for name, _ in swapped} >= set(variants), swapped  # every module has a name swapped
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
