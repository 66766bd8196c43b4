"""Issue 27's measured case after an upgrade: a project an older tracker stored with offload_high and
no offload_low, 3,000 of its 5,000 items on disk, the queue drained and /request answering 404.
A real `tracker maintain` (default interval) brings every item back while a client drains, logs
the unsafe settings once, and `tracker project show` and `tracker status` flag them."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from support.paths import TRACKER_BIN
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_registry, staging
from tracker_core.offload.lease import Lease

P = "stranded"
K = ProjectKeys(P)
NAMES = [f"https://example.com/a b/{n}?q=%2F&x=1#frag" for n in range(5000)]


def tracker_json(redis_url: str, *args: str) -> dict:
    done = subprocess.run(
        [str(TRACKER_BIN), "--redis-url", redis_url, "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def drain(engine: Engine) -> list[str]:
    """Claim until /request finds nothing (a warrior's view: its queue is empty)."""
    claimed = []
    while True:
        status, names = engine.claim(P, "drainer", "192.0.2.9", 100)
        if status != 200:
            return claimed
        claimed += names


def test_a_real_maintain_refills_a_project_stored_with_stranding_settings(redis_url, r, tmp_path):
    segments = tmp_path / "segments"
    project_verbs.create(AdminContext.from_url(redis_url), P)
    item_verbs.add(AdminContext.from_url(redis_url), P, NAMES)
    # What the older tracker accepted and did: offload_high alone, the excess offloaded.
    r.hset(K.settings, mapping={"offload_high": "2000", "offload_segment_items": "1000"})
    r.hincrby(K.settings, "settings_age", 1)
    lease = Lease(r, K, "old-maintainer")
    assert lease.take()
    for _ in range(3):
        assert staging.offload_one(r, K, segments, 1000, lease) == 1000
    lease.release()
    engine = Engine(redis_url)
    claimed = drain(engine)
    assert len(claimed) == 2000 and sum(segment_registry.registry(r, K).values()) == 3000  # stranded
    assert tracker_json(redis_url, "project", "show", P)["offload_warning"].startswith(
        "offload_high=2000 without offload_low"
    )
    assert tracker_json(redis_url, "status", P)["offload_warning"].startswith("offload_high=2000 without")

    maintain = subprocess.Popen(
        [str(TRACKER_BIN), "--redis-url", redis_url, "maintain", "--segments-dir", str(segments)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while segment_registry.registry(r, K) or r.scard(K.todo):
            assert time.monotonic() < deadline, "the offloaded items did not come back"
            claimed += drain(engine)
            time.sleep(0.05)
        time.sleep(2.5)  # two more passes at the default interval: none may log it again
    finally:
        maintain.send_signal(signal.SIGTERM)
        log = maintain.communicate(timeout=30)[1]
    assert sorted(claimed) == sorted(NAMES)  # every item handed out, once
    warned = [line for line in log.splitlines() if "without offload_low" in line]
    assert len(warned) == 1, log
    assert f"{P}: offload_high=2000 without offload_low" in warned[0]
    assert (
        "refilling meanwhile with offload_high=2000 offload_low=1000 offload_segment_items=1000" in warned[0]
    )
