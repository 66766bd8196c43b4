"""The data layer's ceiling: the claim and done scripts pipelined over one hiredis connection."""

from __future__ import annotations

import time

import hiredis

from server_bench.items import ItemSupply
from server_bench.meter import RedisMeter
from server_bench.plan import MULTI, PROJECT, Plan
from tracker_core import scripts
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items.engine import Engine


class RecordingConnection:
    """Stands in for the engine's connection to capture the exact EVALSHA it would send.

    The engine sends claims and dones as ready RESP bytes (RawRedis.execute_packed, see
    tracker_core.scripts.packed) and anything else as arguments (execute_command): both are
    recorded as the argument tuple, the packed bytes read back with hiredis's own parser. Anything
    else (the settings the engine reloads when its cache expires) goes to the real connection."""

    def __init__(self, real):
        self.real = real
        self.commands: list[tuple] = []

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def execute_command(self, *args):
        self.commands.append(args)
        return [200, 0, 1, 0, 0]  # fits both claim's and done's reply shape

    def execute_packed(self, payload: bytes):
        reader = hiredis.Reader()
        reader.feed(payload)
        return self.execute_command(*reader.gets())


def recorded(engine: Engine, call) -> tuple:
    """The EVALSHA (an argument tuple) that CALL, a claim or done through ENGINE, would send."""
    real = engine.conn
    recorder = RecordingConnection(real)
    engine.conn = recorder
    try:
        call()
    finally:
        engine.conn = real
    return recorder.commands[-1]


def pipelined_rate(conn: RawRedis, commands: list[tuple], seconds: float, batch: int = 200) -> dict:
    """Send COMMANDS in pipelined batches (cycling) for about SECONDS; calls/s and failures."""
    calls = failures = 0
    position = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline and position < len(commands):
        chunk = commands[position : position + batch]
        position += batch
        for reply in conn.pipeline(chunk):
            calls += 1
            if not isinstance(reply, list) or reply[0] != 200:
                failures += 1
    elapsed = time.perf_counter() - start
    return {
        "calls": calls,
        "seconds": round(elapsed, 3),
        "calls_per_s": round(calls / elapsed, 1),
        "failures": failures,
    }


def data_layer_ceiling(
    plan: Plan, redis_url: str, engine: Engine, supply: ItemSupply, meter: RedisMeter
) -> list[dict]:
    """The claim and done scripts through one pipelined hiredis connection, as the engine calls them."""
    conn = RawRedis(redis_url)
    for name in ("claim", "done"):  # pipelined EVALSHA has no NOSCRIPT retry: load them first
        conn.execute_command("SCRIPT", "LOAD", scripts.SCRIPTS[name].source)
    results = []
    downloaders = [f"warrior0-{n}" for n in range(500)]
    for label, wanted, guess_per_s in (
        ("claim (request)", 1, 40_000),
        (f"claim (multi={MULTI})", MULTI, 12_000),
    ):
        calls_needed = int(guess_per_s * plan.data_layer_s * 1.3)
        supply.top_up(calls_needed * wanted)
        commands = [
            recorded(engine, lambda d=d, wanted=wanted: engine.claim(PROJECT, d, "127.0.0.1", wanted))
            for d in downloaders
        ]
        commands = (commands * (calls_needed // len(commands) + 1))[:calls_needed]
        todo_before = supply.todo()
        meter.start()
        rate = pipelined_rate(conn, commands, plan.data_layer_s)
        redis_figures = meter.stop(rate["calls"])
        rate.update(
            mix=label,
            items_per_s=round((todo_before - supply.todo()) / rate["seconds"], 1),
            redis=redis_figures,
        )
        results.append(rate)
        supply.recycle()
    # done: claim first (through the engine), then feed one done per item.
    calls_needed = int(20_000 * plan.data_layer_s * 1.3)
    supply.top_up(calls_needed)
    commands = []
    while len(commands) < calls_needed:
        downloader = downloaders[len(commands) // 100 % len(downloaders)]
        _, names = engine.claim(PROJECT, downloader, "127.0.0.1", 100)
        commands += [
            recorded(
                engine,
                lambda d=downloader, n=name: engine.done(
                    PROJECT, d, "20240101.01", [n], ["data", 1048576], '{"sha1":"bench"}'
                ),
            )
            for name in names
        ]
    meter.start()
    rate = pipelined_rate(conn, commands, plan.data_layer_s)
    rate.update(mix="done", items_per_s=rate["calls_per_s"], redis=meter.stop(rate["calls"]))
    results.append(rate)
    supply.recycle()
    conn.close()
    return results
