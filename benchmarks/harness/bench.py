"""What a case is handed: its sizes (full or quick), a temporary directory, and Redis."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from harness import redis as redis_start


class Bench:
    """One case's run. ``size`` gives each knob its full or quick value (``--set NAME=VALUE``
    overrides it); ``tmp`` is removed after the case; ``out`` is where its result files go (for a
    case that writes more than NAME.json and NAME.md, such as plots); ``redis`` and ``cluster``
    start servers that are stopped after it, on failure too."""

    def __init__(self, name: str, quick: bool, tmp: Path, out: Path, overrides: dict[str, str] | None = None):
        self.name, self.quick, self.tmp, self.out = name, quick, tmp, out
        self.overrides = dict(overrides or {})
        self.used: dict[str, object] = {}  # every knob's value, recorded in the result file
        self._cleanup = contextlib.ExitStack()

    def size(self, knob: str, full, quick=None):
        """KNOB's value: FULL, or QUICK under --quick (FULL if QUICK is None), or --set's."""
        value = full if quick is None or not self.quick else quick
        if knob in self.overrides:
            value = _parse(self.overrides[knob], full)
        self.used[knob] = value
        return value

    def redis(self, name: str = "redis", **options) -> redis_start.EmbeddedRedis:
        """A started redis-server in tmp/NAME (options: ``harness.redis.start_redis``'s)."""
        server = redis_start.start_redis(self.tmp / name, **options)
        self._cleanup.callback(server.stop)
        return server

    def cluster(self, primaries: int, replicas: int = 0, name: str = "cluster", aof: bool = True):
        """A started Redis Cluster in tmp/NAME, stopped after the case."""
        cluster = redis_start.start_cluster(self.tmp / name, primaries, replicas, aof)
        self._cleanup.callback(cluster.stop)
        return cluster

    def on_exit(self, callback: Callable, *args) -> None:
        """Call CALLBACK(*ARGS) when the case ends (last registered, first called)."""
        self._cleanup.callback(callback, *args)

    def enter(self, context):
        """Enter CONTEXT (a context manager) until the case ends; returns what it yields."""
        return self._cleanup.enter_context(context)

    def close(self) -> None:
        self._cleanup.close()


def _parse(text: str, like):
    """TEXT as the type of LIKE (a list or tuple: comma-separated items of its first's type)."""
    if isinstance(like, bool):
        return text.lower() in ("1", "true", "yes", "on")
    if isinstance(like, (list, tuple)):
        kind = type(like[0]) if like else str
        return type(like)(kind(item) for item in text.split(",") if item)
    if like is None:
        return text
    return type(like)(text)
