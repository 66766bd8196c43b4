"""The registered cases: what each measures, how it reports, and what it needs to run."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

# Every module that registers cases, imported by ``load``; a case module's name says what it measures.
CASE_MODULES = (
    "micro",
    "cases.round_trip_floor",
    "cases.access_log",
    "cases.request_metrics",
    "cases.worker_path",
    "cases.aof_bytes",
    "cases.bloom",
    "cases.limits",
    "cpu_bench",
    "server_bench",
    "cases.offload",
    "cases.backup",
    "cases.cluster_failover",
    "cases.shard_scale",
)


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable  # (Bench) -> dict of figures
    report: Callable[[dict], str] | None = None  # the figures as NAME.md
    history: Callable[[dict | None], list] | None = None  # the previous NAME.json -> its history
    needs: tuple[str, ...] = ()  # programs on PATH the case runs (a missing one skips it)
    root: bool = False  # needs root (cgroups)
    writes: bool = True  # False: the case keeps no result file of its own (its figures are printed)

    @property
    def summary(self) -> str:
        return (self.run.__doc__ or "").strip().splitlines()[0] if self.run.__doc__ else ""


CASES: dict[str, Case] = {}


def case(name: str, **options) -> Callable:
    """Register the decorated function as the case NAME (options: the fields of ``Case``)."""

    def register(run: Callable) -> Callable:
        if name in CASES:
            raise ValueError(f"case {name} registered twice")
        CASES[name] = Case(name, run, **options)
        return run

    return register


def load() -> dict[str, Case]:
    """Every registered case, in the order CASE_MODULES lists their modules."""
    order = {}
    for module in CASE_MODULES:
        importlib.import_module(module)
        for name, registered in CASES.items():
            if registered.run.__module__.startswith(module):
                order.setdefault(name, registered)
    return order | CASES
