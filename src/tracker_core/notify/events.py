"""When each event fires and when it re-arms, as pure functions: (what was last seen, what is
seen now) -> (what to remember, the events). The detector (detect.py) keeps what they return in
Redis, so a restart or another maintainer goes on from it. docs/operations.md ("Webhooks")
states the same rules for operators.
"""

from __future__ import annotations

from dataclasses import dataclass

Events = list[tuple[str, dict]]  # (event name, its data)


@dataclass(frozen=True)
class Thresholds:
    """What counts as a problem (the `tracker maintain --webhook-...` options)."""

    backlog_growth: int = 100_000  # items more than at the window's lowest point
    backlog_window_s: float = 3600.0
    stall_s: float = 120.0  # refills stalled, or offloading stuck, this long
    clock_off_s: float = 1.0  # re-armed below half of it
    drained_cooldown_s: float = 600.0  # at most one `drained` per project this often


@dataclass(frozen=True)
class ProjectSeen:
    """One project as one check read it (every shard summed)."""

    queued: int  # every queue, held items, downloaders' queues and queued items offloaded
    out: int
    done: int  # items_done, the counter
    paused: bool
    stalled: tuple[str, ...]  # queues empty in Redis while segments of theirs wait on disk
    stuck: tuple[str, ...]  # queues a segment past offload_high, or "offloading" (staged)


def project(old: dict | None, seen: ProjectSeen, now_ms: int, th: Thresholds) -> tuple[dict, Events]:
    """PROJECT's state and events; OLD None: first sight (remembered, nothing fires)."""
    events: Events = []
    empty = seen.queued == 0 and seen.out == 0
    if old is None:
        state = {"busy": not empty, "done": seen.done, "paused": seen.paused, "drained_ms": None}
        state.update(_window(now_ms, seen.queued))
        _lasting(state, "stall", seen.stalled, now_ms, th, "refill.stalled")  # its start, if any
        _lasting(state, "stuck", seen.stuck, now_ms, th, "offload.stuck")
        return state, events
    state = dict(old)
    # drained: from items queued or out (or dones since the last check) to none.
    if empty and (old.get("busy") or seen.done > old.get("done", 0)):
        last = old.get("drained_ms")
        if last is None or now_ms - last >= th.drained_cooldown_s * 1000:
            events.append(("project.drained", {"done": seen.done}))
            state["drained_ms"] = now_ms
    state["busy"], state["done"] = not empty, seen.done
    if seen.paused != bool(old.get("paused")):
        events.append(("project.paused" if seen.paused else "project.resumed", {}))
    state["paused"] = seen.paused
    events += _backlog(state, seen.queued, now_ms, th)
    events += _lasting(state, "stall", seen.stalled, now_ms, th, "refill.stalled")
    events += _lasting(state, "stuck", seen.stuck, now_ms, th, "offload.stuck")
    return state, events


def _window(now_ms: int, queued: int) -> dict:
    return {"window_ms": now_ms, "window_low": queued, "grew": False, "growing": False}


def _backlog(state: dict, queued: int, now_ms: int, th: Thresholds) -> Events:
    """backlog.growing: QUEUED is backlog_growth above the lowest backlog of the window (which
    starts backlog_window_s after the last). Once fired it stays quiet until a whole window
    passes without that growth."""
    events: Events = []
    if "window_ms" not in state:
        state.update(_window(now_ms, queued))
    state["window_low"] = min(state["window_low"], queued)
    grown = queued - state["window_low"]
    if grown >= th.backlog_growth:
        state["grew"] = True
        if not state["growing"]:
            state["growing"] = True
            over_s = (now_ms - state["window_ms"]) / 1000
            events.append(("backlog.growing", {"from": state["window_low"], "to": queued, "over_s": over_s}))
    if now_ms - state["window_ms"] >= th.backlog_window_s * 1000:
        growing = state["growing"] and state["grew"]
        state.update(_window(now_ms, queued), growing=growing)
    return events


def _lasting(
    state: dict, name: str, queues: tuple[str, ...], now_ms: int, th: Thresholds, event: str
) -> Events:
    """EVENT once QUEUES has been non-empty at every check for stall_s; re-armed at the first
    check that finds it empty."""
    since_field = f"{name}_ms"
    fired_field = "stalled" if name == "stall" else name
    if not queues:
        state[since_field], state[fired_field] = None, False
        return []
    since = state.get(since_field)
    if since is None:
        since = state[since_field] = now_ms
    if state.get(fired_field) or now_ms - since < th.stall_s * 1000:
        return []
    state[fired_field] = True
    return [(event, {"queues": list(queues), "since_ms": since})]


def clock(old: dict | None, offset_s: float | None, node: str, th: Thresholds) -> tuple[dict, Events]:
    """clock.off: this node's wall clock more than clock_off_s off Redis's; re-armed once it is
    back within half of that (a clock hovering at the threshold fires once)."""
    off = bool(old and old.get("off"))
    if offset_s is None:
        return {"off": off}, []
    if not off and abs(offset_s) > th.clock_off_s:
        data = {"node": node, "offset_s": round(offset_s, 3), "threshold_s": th.clock_off_s}
        return {"off": True}, [("clock.off", data)]
    if off and abs(offset_s) < th.clock_off_s / 2:
        return {"off": False}, []
    return {"off": off}, []


def failover(old: dict | None, primaries: list[str]) -> tuple[dict, Events]:
    """redis.failover: the primaries serving the tracker's keys are not those last seen (a
    Sentinel or Cluster promoted a replica). A single Redis keeps its address: never."""
    state = {"primaries": primaries}
    if old is None or old.get("primaries") == primaries:
        return state, []
    return state, [("redis.failover", {"before": old.get("primaries"), "after": primaries})]
