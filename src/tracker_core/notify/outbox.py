"""The outbox: one delivery per (event, hook) in Redis, so that events outlive a maintainer's
restart and each is delivered by one maintainer at a time.

A delivery is queued by notify_emit (with the state change that found its event), claimed
for CLAIM_MS by one deliverer (notify_claim: out of ``due`` into ``claimed``), and finished by
notify_finish: delivered, tried again after a back-off, or dropped once its attempts are used
up (counted, per hook and in all). A deliverer that dies mid-delivery leaves a claim that
expires, and the delivery is due again: a receiver may see one delivery twice (same event id),
never an event lost while the outbox has room. The outbox holds at most MAX_QUEUED deliveries;
an event past that is counted (dropped_full) and not queued.
"""

from __future__ import annotations

import json
import random
import uuid

from tracker_core import keyspace, scripts
from tracker_core.notify.hooks import Hook

MAX_QUEUED = 10_000
COUNTERS = ("queued", "delivered", "dropped", "gone", "dropped_full")


def new_event(name: str, project: str | None, data: dict, now_ms: int) -> dict:
    return {"id": uuid.uuid4().hex, "event": name, "project": project, "occurred_ms": now_ms, "data": data}


def deliveries(events: list[dict], hooks: list[Hook], now_ms: int) -> list[tuple[str, str]]:
    """(delivery id, JSON record) for every hook that wants each of EVENTS."""
    rows = []
    for event in events:
        for hook in hooks:
            if hook.wants(event["event"], event["project"]):
                record = {"hook": hook.hook_id, "event": event, "attempts": 0, "created_ms": now_ms}
                rows.append((f"{event['id']}.{hook.hook_id}", json.dumps(record, sort_keys=True)))
    return rows


def claim(client, holder: str, now_ms: int, claim_ms: int, count: int) -> list[tuple[str, dict]]:
    """Up to COUNT due deliveries, held for HOLDER for CLAIM_MS: (id, record)."""
    reply = scripts.notify_claim(client, now_ms=now_ms, holder=holder, claim_ms=claim_ms, count=count)
    flat = list(reply[1:])
    return [(flat[i], json.loads(flat[i + 1])) for i in range(0, len(flat), 2)]


def finish(
    client,
    holder: str,
    delivery_id: str,
    record: dict,
    outcome: str,
    status: str,
    now_ms: int,
    retry_ms: int = 0,
) -> bool:
    """Record OUTCOME ('delivered', 'retry', 'dropped', 'gone'); False when the claim had expired
    (another deliverer has the delivery now)."""
    reply = scripts.notify_finish(
        client,
        holder=holder,
        delivery_id=delivery_id,
        outcome=outcome,
        now_ms=now_ms,
        hook_id=record["hook"],
        status=status[:200],
        retry_ms=retry_ms,
        record=json.dumps(record, sort_keys=True) if outcome == "retry" else "",
    )
    return reply == scripts.notify_finish.codes.RECORDED


def backoff_s(failures: int, base_s: float, max_s: float, rand=random.random) -> float:
    """The wait after the FAILURES-th failed attempt: BASE_S doubled each time, at most MAX_S,
    and up to a quarter more at random, so that deliveries failed together spread out (each
    wait is still longer than the one before, until MAX_S)."""
    return min(max_s, base_s * 2 ** (failures - 1)) * (1 + rand() / 4)


def figures(client) -> dict:
    """The outbox now: deliveries waiting (due later or now), claimed, and its counters."""
    pipe = client.pipeline(transaction=False)
    pipe.zcard(keyspace.NOTIFY_DUE)
    pipe.zcard(keyspace.NOTIFY_CLAIMED)
    pipe.hmget(keyspace.NOTIFY_STATS, COUNTERS)
    waiting, claimed, counters = pipe.execute()
    return {"waiting": waiting, "claimed": claimed, **{c: int(v or 0) for c, v in zip(COUNTERS, counters)}}
