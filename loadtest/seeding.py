"""Seed the load test's project and account for every item at the end (master or local only).

Goes through the admin verbs (tracker_core.admin), the same code as ``tracker items add`` and
``tracker status``; only the process that seeds needs the tracker installed, workers need Locust alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tracker_core.admin import census_verbs, item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import Conflict

SETTLE_S = 5.0  # how long the final count may take to settle (a backfeed still being deduplicated)


def items_total(status: dict) -> int:
    """Every item of a project: queued, out, done, and (when present) dead or offloaded."""
    return (
        status["todo_total"]
        + status["out"]
        + status["done"]
        + int(status.get("dead", 0) or 0)
        + int(status.get("offloaded", 0) or 0)
    )


@dataclass
class Seeding:
    project: str
    seeded: int
    total_before: int
    done_before: int


def seed(redis_url: str, project: str, count: int) -> Seeding:
    """Create PROJECT if needed and queue COUNT items with names never used before."""
    admin = AdminContext.from_url(redis_url)
    try:
        project_verbs.create(admin, project, {"title": "Load test"})
    except Conflict:
        pass  # seeded before: the new names go into the same project
    before = census_verbs.status(admin, project)
    run_tag = f"{project}-{time.time_ns():x}"  # new names each run, so none is a duplicate
    answer = item_verbs.add(admin, project, (f"{run_tag}-{i:07d}" for i in range(count)))
    added, duplicates = answer["added"], answer["duplicates"]
    if added != count:
        raise RuntimeError(f"seeding {project}: {added} of {count} items added, {duplicates} duplicates")
    return Seeding(project, count, items_total(before), before["done"])


def account(redis_url: str, seeding: Seeding, backfed_new: int, done_by_clients: int) -> dict:
    """Check that every seeded (and newly backfed) item is in a queue, out or done.

    Also checks that the server counted at least every item a client saw answered OK (a done it
    lost would break the warriors' trust); it may have counted more, from dones whose answer the
    stopping clients never read.
    """
    admin = AdminContext.from_url(redis_url)
    expected = seeding.total_before + seeding.seeded + backfed_new
    deadline = time.monotonic() + SETTLE_S
    while True:
        status = census_verbs.status(admin, seeding.project)
        total = items_total(status)
        if total == expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    done_delta = status["done"] - seeding.done_before
    failures = []
    if total != expected:
        failures.append(
            f"items not accounted for: {total} in queues+out+done, expected {expected} "
            f"({seeding.total_before} before + {seeding.seeded} seeded + "
            f"{backfed_new} backfed)"
        )
    if done_delta < done_by_clients:
        failures.append(f"server counted {done_delta} items done, clients saw {done_by_clients} answered OK")
    return {
        "project": seeding.project,
        "expected_total": expected,
        "total": total,
        "todo_total": status["todo_total"],
        "out": status["out"],
        "done": status["done"],
        "done_delta": done_delta,
        "done_by_clients": done_by_clients,
        "seeded": seeding.seeded,
        "total_before": seeding.total_before,
        "ok": not failures,
        "failures": failures,
    }
