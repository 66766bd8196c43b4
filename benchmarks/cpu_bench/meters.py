"""The two CPU accounts around a run: the bjoern workers' (/proc) and Redis's own (`INFO`)."""

from __future__ import annotations

import os
import time

from tracker_api.server import worker_pids

# A server listens before it forks its workers, so its port can answer before they exist.
CHILDREN_WAIT_S = 10.0

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """utime+stime of PID in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) may hold spaces or parentheses: count fields after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


class WorkerCpu:
    """CPU of every worker a server process forked (its direct children), summed.

    The supervising parent only waits on its children, so it is left out: what is measured is
    the work of serving requests.
    """

    def __init__(self, server_pid: int, wait_s: float = CHILDREN_WAIT_S):
        deadline = time.monotonic() + wait_s
        self.pids = worker_pids(server_pid)
        while not self.pids and time.monotonic() < deadline:
            time.sleep(0.05)
            self.pids = worker_pids(server_pid)
        if not self.pids:
            raise RuntimeError(f"process {server_pid} has no worker children after {wait_s:g} s")
        self.before = 0.0

    def total_s(self) -> float:
        return sum(process_cpu_s(pid) for pid in self.pids)

    def start(self) -> None:
        self.before = self.total_s()

    def stop(self) -> float:
        """CPU seconds the workers spent since start()."""
        return self.total_s() - self.before


def redis_cpu_s(conn) -> float:
    """Redis's CPU seconds so far (`INFO cpu`: used_cpu_sys + used_cpu_user, every thread)."""
    cpu = conn.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


class RedisCpu:
    """Redis's CPU (`INFO cpu`: used_cpu_sys + used_cpu_user, every thread) and its commands'
    own accounting (`INFO commandstats`), as deltas between start() and stop()."""

    def __init__(self, conn):
        self.conn = conn
        self.before: dict = {}

    def snapshot(self) -> dict:
        stats = self.conn.info("commandstats")
        return {
            "cpu_s": redis_cpu_s(self.conn),
            "commands": {
                name.removeprefix("cmdstat_"): (int(s["calls"]), int(s["usec"])) for name, s in stats.items()
            },
        }

    def start(self) -> None:
        self.before = self.snapshot()

    def stop(self) -> dict:
        """CPU seconds, and calls and usec per command, since start() (INFO itself left out)."""
        after = self.snapshot()
        commands = {}
        for name, (calls, usec) in after["commands"].items():
            calls_before, usec_before = self.before["commands"].get(name, (0, 0))
            if calls > calls_before and name != "info":
                commands[name] = {"calls": calls - calls_before, "usec": usec - usec_before}
        return {"cpu_s": after["cpu_s"] - self.before["cpu_s"], "commands": commands}


def per_unit(redis: dict, units: int, worker_cpu_s: float | None = None) -> dict:
    """The figures per request (or per item): CPU µs of Redis and the workers, and EVALSHA's own
    µs per call (the scripts' time inside Redis, without network and parsing)."""
    evalsha = redis["commands"].get("evalsha", {"calls": 0, "usec": 0})
    figures = {
        "redis_cpu_us": round(redis["cpu_s"] * 1e6 / units, 2) if units else None,
        "redis_commands_per_unit": round(sum(c["calls"] for c in redis["commands"].values()) / units, 3)
        if units
        else None,
        "evalsha_calls": evalsha["calls"],
        "evalsha_us_per_call": round(evalsha["usec"] / evalsha["calls"], 2) if evalsha["calls"] else None,
        "commands": redis["commands"],
    }
    if worker_cpu_s is not None:
        figures["worker_cpu_us"] = round(worker_cpu_s * 1e6 / units, 2) if units else None
    return figures
