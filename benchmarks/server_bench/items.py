"""Items for the runs: the to-do queue kept full with fresh names, claims for the done runs."""

from __future__ import annotations

import time
from pathlib import Path

from server_bench.plan import PROJECT
from tracker_core.admin import item_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.items.engine import Engine


class ItemSupply:
    """Keep the project's todo queue full enough for the next run, with fresh names."""

    def __init__(self, admin: AdminContext, engine: Engine):
        self.admin = admin
        self.engine = engine
        self.keys = engine.keys(PROJECT)
        self.next_number = 0
        self.seeded = 0
        self.seed_seconds = 0.0
        self.recycle_seconds = 0.0

    def todo(self) -> int:
        return self.admin.conn.scard(self.keys.todo)

    def top_up(self, wanted: int) -> None:
        missing = wanted - self.todo()
        if missing <= 0:
            return
        start = time.perf_counter()
        first, self.next_number = self.next_number, self.next_number + missing
        names = (f"item-{n:09d}" for n in range(first, self.next_number))
        item_verbs.add(self.admin, PROJECT, names, batch=10_000)
        self.seed_seconds += time.perf_counter() - start
        self.seeded += missing

    def recycle(self) -> None:
        """Release every claim a run left behind back to todo (the release script, as an admin).

        Adding items costs about four times what releasing them does, so runs reuse them.
        """
        start = time.perf_counter()
        while True:
            names = self.admin.conn.zrange(self.keys.out, 0, 9_999)
            if not names:
                break
            self.engine.release(PROJECT, "", names)
        self.recycle_seconds += time.perf_counter() - start


def claim_for_dones(engine: Engine, count: int, path: Path) -> int:
    """Claim COUNT items through the engine for 200 downloaders; write DOWNLOADER<TAB>ITEM lines."""
    lines = []
    while len(lines) < count:
        downloader = f"finisher-{len(lines) // 100 % 200}"
        status, names = engine.claim(PROJECT, downloader, "127.0.0.1", 100)
        if status != 200:
            raise RuntimeError(f"claim for the done run answered {status}")
        lines += [f"{downloader}\t{name}" for name in names]
    path.write_text("\n".join(lines[:count]) + "\n")
    return count
