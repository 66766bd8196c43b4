"""A bjoern worker freezes its start-up heap before serving (tracker_api.server.settle_heap): full
collections later walk only what serving made, not the ~10^5 objects of the modules and the app."""

from __future__ import annotations

import gc
import socket
import time
import weakref

import pytest

from tracker_api import server
from tracker_api.web.config import AppConfig


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def _full_collection_s() -> float:
    started = time.perf_counter()
    gc.collect(2)
    return time.perf_counter() - started


def test_settle_heap_puts_the_start_up_heap_out_of_the_collectors_sight(unfrozen):
    long_lived = [[n] for n in range(200_000)]  # an app's worth of objects, tracked by gc (lists)
    gc.collect()
    before = min(_full_collection_s() for _ in range(3))
    assert gc.get_freeze_count() == 0
    server.settle_heap()
    assert gc.get_freeze_count() >= len(long_lived)
    after = min(_full_collection_s() for _ in range(3))
    assert after < before / 3
    assert long_lived[-1] == [199_999]  # frozen, not freed


def test_settle_heap_collects_the_start_up_garbage_first(unfrozen):
    class Cycle:
        pass

    garbage = Cycle()
    garbage.me = garbage
    collected = []
    weakref.finalize(garbage, collected.append, True)
    del garbage
    server.settle_heap()
    assert collected == [True]  # freed, not frozen forever


def test_a_worker_settles_its_heap_after_building_the_app_and_before_serving(monkeypatch, unfrozen):
    steps = []
    monkeypatch.setattr(server.signal, "signal", lambda *a: None)
    monkeypatch.setattr(server, "make_app", lambda *a: steps.append("app") or "app")
    monkeypatch.setattr(server, "settle_heap", lambda: steps.append("settle"))

    class Guard:
        def __init__(self, *a):
            pass

        def start(self):
            steps.append("guard")
            return self

    monkeypatch.setattr(server, "ConnectionGuard", Guard)
    monkeypatch.setattr(server.bodycap, "run_capped", lambda *a: steps.append("serve"))
    with socket.create_server(("127.0.0.1", 0)) as sock:
        server._worker(sock, [sock], "redis://unused", AppConfig(), server.Limits())
    assert steps == ["app", "settle", "guard", "serve"]
