"""Locust warriors, headless, on a project a test seeds in the tracker it started.

Only loadtest.runner is imported, which starts Locust in processes of its own: gevent stays out of
pytest.
"""

from __future__ import annotations

from pathlib import Path

from loadtest.runner import run_headless

from support.processes import LiveServer


def seeded_run(server: LiveServer, project: str, seed_items: int, workdir: Path, **options) -> dict:
    """Run Locust warriors against SERVER on PROJECT, which the run first seeds with SEED_ITEMS
    through the server's Redis; logs go to WORKDIR. Each warrior claims 1 to 10 items at a time
    unless OPTIONS (run_headless's keywords) say otherwise."""
    options.setdefault("multi", "1-10")
    return run_headless(
        server.base,
        redis_url=server.redis_url,
        project=project,
        seed_items=seed_items,
        workdir=workdir,
        **options,
    )
