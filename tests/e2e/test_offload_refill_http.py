"""Refill on demand through real HTTP (issue 27): a real `tracker serve` (its default workers) and a
real `tracker maintain` (its default interval, 1 s) while clients drain offloaded items as fast as
they can, claiming multi=100 and reporting each claim done. An empty answer while items still wait
(on disk, or refilled just after the claim) is counted; before refills came on demand a 1M-item
drain at the small watermarks got 30,846 of them with one client, and one at the default segment
size 1,599 with four (benchmarks/results/offload_refill.md).
"""

from __future__ import annotations

import os
import threading

import pytest

from cases.offload import http_drain
from support import census as census_support
from support.paths import TRACKER_BIN
from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.infra import processes
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_registry
from tracker_core.scripts.constants import REFILL_WATCH_FIELD

pytestmark = pytest.mark.slow

P = "refill"
K = ProjectKeys(P)


def drain_offloaded(admin, r, redis_url, tmp_path, settings: dict, n_items: int, clients: int) -> dict:
    """N_ITEMS offloaded at SETTINGS by `tracker maintain`, then drained through `tracker serve`;
    the drain's figures, with the largest todo seen while it ran."""
    names = [f"https://example.com/item/{i}?q=%20x" for i in range(n_items)]
    project_verbs.create(admin, P, settings)
    item_verbs.add(admin, P, names)
    env = dict(os.environ, TRACKER_REDIS_URL=redis_url)
    high = int(settings["offload_high"])
    maintain = serve = None
    watching = threading.Event()
    largest = [0]
    try:
        maintain = processes.start(
            [TRACKER_BIN, "--data-dir", tmp_path, "maintain", "--segments-dir", tmp_path / "segments"],
            env=env,
            output=tmp_path / "maintain.log",
        )
        # Offloaded, and claims told when to ask.
        assert processes.wait_for(
            lambda: r.scard(K.todo) <= high and r.hexists(K.settings, REFILL_WATCH_FIELD), 60
        )
        assert census_verbs.status(admin, P)["offloaded"] == n_items - high
        port = processes.free_port()
        serve = processes.start(
            [TRACKER_BIN, "--data-dir", tmp_path, "serve", "--port", str(port)],
            env=env,
            output=tmp_path / "serve.log",
        )
        processes.wait_for_port(port, serve)

        def watch_todo():  # a refill never takes the queue past offload_high (Redis memory)
            while not watching.wait(0.005):
                largest[0] = max(largest[0], r.scard(K.todo))

        threading.Thread(target=watch_todo, daemon=True).start()
        drained = http_drain(port, redis_url, P, clients)
    finally:
        watching.set()
        processes.stop(serve)
        processes.stop(maintain)
    assert sorted(drained["names"]) == sorted(names), "every item handed out exactly once"
    census_support.assert_each_once(r, K, names)
    status = census_verbs.status(admin, P)
    assert (status["todo_total"], status["offloaded"], status["out"], status["done"]) == (0, 0, 0, n_items)
    assert segment_registry.registry(r, K) == {} and not list((tmp_path / "segments" / P).glob("*.zst"))
    return {**drained, "largest_todo": largest[0]}


def test_small_watermarks_one_client_at_most_three_empty_answers(admin, r, redis_url, tmp_path):
    # The measurement: one client, 30,000 items, offload_high=2000 offload_low=1000
    # offload_segment_items=1000 (before: 492 empty answers in 27 s with a client that paused
    # after each; this one pauses 20 ms). The queue holds offload_low items when a claim asks:
    # about 90 ms of this drain.
    settings = {"offload_high": "2000", "offload_low": "1000", "offload_segment_items": "1000"}
    drained = drain_offloaded(admin, r, redis_url, tmp_path, settings, 30_000, clients=1)
    assert drained["empty"] <= 3, f"empty answers at {drained['empty_at_s']} s"
    assert drained["largest_todo"] <= 2000
    # 30,000 items at about 100 items a claim: far faster than a refill a second allowed.
    assert drained["seconds"] < 20


def test_default_segments_full_speed_no_empty_answer(admin, r, redis_url, tmp_path):
    # offload_segment_items at its default (50,000), the least room between the watermarks it
    # allows, as many clients as `tracker serve` starts workers (two a core): no empty answer.
    settings = {"offload_high": "100000", "offload_low": "50000", "offload_segment_items": "50000"}
    clients = 2 * (os.cpu_count() or 1)
    drained = drain_offloaded(admin, r, redis_url, tmp_path, settings, 250_000, clients=clients)
    assert drained["empty"] == 0, f"empty answers at {drained['empty_at_s']} s"
    assert drained["largest_todo"] <= 100_000
