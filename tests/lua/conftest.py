"""Fixtures of the per-script tests: each script is called through its binding
(tracker_core.scripts) on the hot path's connection (RawRedis) and its effect read back with
redis-py (the `r` fixture)."""

from __future__ import annotations

import pytest

from tracker_core import scripts
from tracker_core.infra import topology
from tracker_core.keyspace import ProjectKeys
from tracker_core.project import settings_schema

NOW_MS = 1_700_000_000_000


@pytest.fixture
def conn(redis_url):
    connection = topology.connect(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def now_ms() -> int:
    return NOW_MS


@pytest.fixture
def k() -> ProjectKeys:
    return ProjectKeys("lua-contract")


@pytest.fixture
def project(conn, k) -> ProjectKeys:
    """K's project, created by its script with the default settings (settings_age 1)."""
    scripts.create_project(conn, k, now_ms=NOW_MS, settings=settings_schema.defaults())
    return k


@pytest.fixture
def names() -> list[str]:
    """Item names as the biggest projects use them: URLs with slashes, ?, %, # and spaces."""
    return [
        "https://example.com/a/b?q=1&r=%20x#frag",
        "http://example.org/path with spaces/?u=%E2%9C%93",
        "https://example.net/" + "long/" * 400 + "end?x=#y",
    ]


@pytest.fixture
def claimed(conn, project, r, now_ms):
    """A function that queues NAMES in todo and claims them all for DOWNLOADER from 10.0.0.1."""

    def claim_names(names, downloader="alice"):
        r.sadd(project.todo, *names)
        reply = scripts.claim(
            conn,
            project,
            now_ms=now_ms,
            downloader=downloader,
            ip="10.0.0.1",
            wanted=len(names),
        )
        return reply.items

    return claim_names
