"""server.serve() hands its AppConfig to every forked worker's app (no setting through os.environ)."""

from __future__ import annotations

import sys
import textwrap
import urllib.error
import urllib.request

import pytest

from support.processes import free_port, start, stop, wait_for_line, wait_for_port
from tracker_core.admin import project_verbs

LIVE_URL = "ws://feed.example:9/live?from=serve"
METRICS_TOKEN = "metrics-token-from-the-config"


def _status(url: str, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def served(redis_url, admin, monkeypatch):
    # Neither setting may come from the environment: the workers must get them from the config.
    monkeypatch.delenv("TRACKER_LIVE_URL", raising=False)
    monkeypatch.delenv("TRACKER_METRICS_TOKEN", raising=False)
    project_verbs.create(admin, "proj")
    port = free_port()
    code = f"""
        from tracker_api.web.config import AppConfig
        from tracker_api.server import serve
        config = AppConfig(live_url={LIVE_URL!r}, metrics_token={METRICS_TOKEN!r})
        serve({redis_url!r}, "127.0.0.1", {port}, 2, config=config)
    """
    process = start([sys.executable, "-c", textwrap.dedent(code)], capture=True)
    try:
        wait_for_line(process, "serving on")
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        assert stop(process) == 0  # SIGTERM: a clean stop of the parent and its workers


def test_every_worker_serves_with_the_config_given_to_serve(served):
    # Several requests, so both workers answer some of them.
    for _ in range(6):
        status, page = _status(f"{served}/proj")
        assert status == 200
        assert "ws://feed.example:9/live?from=serve" in page
        status, _ = _status(f"{served}/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert status == 200
    status, _ = _status(f"{served}/metrics", {"Authorization": "Bearer another-token"})
    assert status == 401
