"""Webhooks end to end: `tracker serve` and real `tracker maintain` processes over a real
redis-server, a receiver on loopback. A project driven to its end by real claims and dones is
`drained` at the receiver within seconds of the last done, signed; pause and resume arrive; an
event in the outbox when its maintainer is killed is delivered after the restart; two
maintainers deliver each event once."""

from __future__ import annotations

import json
import signal
import time

import pytest

from support.paths import TRACKER_BIN
from support.processes import start, stop, wait_for
from support.seesaw_runner import run_warrior
from support.webhook_receiver import Receiver
from tracker_core import keyspace
from tracker_core.admin import item_verbs, project_verbs

pytestmark = pytest.mark.slow
P = "webhooked"
ITEMS = [f"https://example.com/page/{i}?q=a%20b" for i in range(30)]
DRAINED_WITHIN_S = 3.0


@pytest.fixture
def receiver():
    found = Receiver()
    yield found
    found.stop()


@pytest.fixture
def maintainers(redis_url, tmp_path):
    """start() -> a `tracker maintain` process (the webhook options set for a test's pace)."""
    started = []

    def start_one(*options: str):
        n = len(started)
        process = start(
            [TRACKER_BIN, "--redis-url", redis_url, "maintain", "--segments-dir", tmp_path / "segments",
             "--webhook-interval-s", "0.2", "--webhook-retry-base-s", "0.5", "--webhook-timeout-s", "2",
             "--webhook-drained-cooldown-s", "0", *options],
            output=tmp_path / f"maintain{n}.log",
        )  # fmt: skip
        started.append(process)
        return process

    yield start_one
    for process in started:
        stop(process)


def seen(r, project: str = P) -> bool:
    """Whether a maintainer's detector has seen PROJECT (its first check is some seconds after the
    process starts on a loaded machine)."""
    return wait_for(lambda: r.hexists(keyspace.NOTIFY_STATE, "project:" + project), 20)


def add_hook(cli, url: str, *options: str) -> dict:
    result = cli("--json", "webhook", "add", url, *options)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_drained_reaches_the_receiver_within_seconds_of_the_last_done(
    admin, cli, r, live_server, maintainers, receiver, tmp_path
):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    hook = add_hook(cli, receiver.url, "--project", P)
    maintainers()
    assert seen(r)  # busy
    # A seesaw-kit warrior's three claims of 10, each reported done by its pipeline.
    result, _ = run_warrior(live_server, tmp_path, 3, project=P, multi=10, downloader="hookwatch")
    assert sorted(result["names"]) == sorted(ITEMS)
    last_done = time.monotonic()  # after the warrior's exit: the latency below is an upper bound
    assert wait_for(lambda: receiver.events("project.drained"), 10)
    (drained,) = receiver.events("project.drained")
    latency = receiver.arrivals("project.drained")[0] - last_done
    assert latency < DRAINED_WITHIN_S, latency  # 0.15-0.17 s at load average 9-12
    assert (drained["project"], drained["data"]["done"]) == (P, len(ITEMS))
    assert receiver.all_signed(hook["secret"])
    assert cli("project", "pause", P).exit_code == 0
    assert wait_for(lambda: receiver.events("project.paused"), 10)
    assert cli("project", "resume", P).exit_code == 0
    assert wait_for(lambda: receiver.events("project.resumed"), 10)
    assert [b["event"] for b in receiver.events()] == ["project.drained", "project.paused", "project.resumed"]
    listed = json.loads(cli("--json", "webhook", "list").output)["webhooks"][0]
    assert (listed["delivered"], listed["failures"], listed["last_status"]) == (3, 0, "HTTP 204")


def test_an_event_in_the_outbox_when_its_maintainer_is_killed_is_delivered_after_the_restart(
    admin, cli, r, maintainers
):
    receiver = Receiver(fail_first=10**6)  # fails until told otherwise
    try:
        project_verbs.create(admin, P)
        add_hook(cli, receiver.url, "--events", "project.paused")
        first = maintainers("--webhook-retry-base-s", "5")  # killed well before its retry
        assert seen(r)
        assert cli("project", "pause", P).exit_code == 0
        assert wait_for(lambda: receiver.received, 10)  # a first attempt, refused
        assert wait_for(lambda: r.zcard(keyspace.NOTIFY_DUE) == 1, 5)  # due again, in the outbox
        first.send_signal(signal.SIGKILL)
        first.wait()
        receiver.fail_first = 0
        maintainers()
        assert wait_for(lambda: r.hlen(keyspace.NOTIFY_DELIVERIES) == 0, 30)  # delivered, once restarted
        time.sleep(1.0)
    finally:
        receiver.stop()
    bodies = receiver.events()
    assert len({b["id"] for b in bodies}) == 1 and [b["attempt"] for b in bodies] == [1, 2]
    assert r.hget(keyspace.NOTIFY_STATS, "delivered") == "1"


def test_two_maintainers_deliver_each_event_once(admin, cli, r, live_server, maintainers, receiver, tmp_path):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS[:4])
    add_hook(cli, receiver.url)
    maintainers()
    maintainers()
    assert seen(r)
    time.sleep(2.0)  # the second one's detector runs too
    for n in range(3):  # each change waited for: a pause undone within a check is not seen
        assert cli("project", "pause", P).exit_code == 0
        assert receiver.has(2 * n + 1)
        assert cli("project", "resume", P).exit_code == 0
        assert receiver.has(2 * n + 2)
    run_warrior(live_server, tmp_path, 1, project=P, multi=4, downloader="hookwatch")
    assert wait_for(lambda: len(receiver.received) >= 7, 15)
    time.sleep(1.5)  # anything twice would be in by now
    names = [b["event"] for b in receiver.events()]
    assert names == ["project.paused", "project.resumed"] * 3 + ["project.drained"]
    assert len({b["id"] for b in receiver.events()}) == 7
