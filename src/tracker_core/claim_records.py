"""A claim's record in `claims` (docs/data-model.md): "DOWNLOADER\\tIP\\tTIMES_CLAIMED\\tCLAIMED_MS".

`out` scores a claim by when it may be reclaimed, so its claim time lives in the record. A record
of three fields was written before that: its `out` score is the claim time (the claim script moves
such an entry to its due time, adding the fourth field, when its reclaim range reaches it).
"""

from __future__ import annotations

import math
from typing import NamedTuple


class ClaimRecord(NamedTuple):
    downloader: str
    ip: str
    times_claimed: int | None  # None: not a record the scripts wrote
    claimed_ms: int | None  # None: a record of three fields (the claim time is its `out` score)


def parse(record: str | None) -> ClaimRecord:
    fields = (record or "").split("\t")
    downloader = fields[0]
    ip = fields[1] if len(fields) > 1 else ""
    times = fields[2] if len(fields) > 2 else ""
    times_claimed = int(times) if times.isdecimal() and times.isascii() else None
    claimed = fields[3] if len(fields) == 4 else ""
    claimed_ms = int(claimed) if claimed.isdecimal() and claimed.isascii() else None
    return ClaimRecord(downloader, ip, times_claimed, claimed_ms)


def claim_times(conn, out_key: str, records: dict) -> dict:
    """Claim time (ms, or None) of each name of RECORDS (name -> record text): from the record,
    or from `out` (one ZMSCORE) for records of three fields."""
    times = {name: parse(text).claimed_ms for name, text in records.items()}
    older = [name for name, ms in times.items() if ms is None]
    if older:
        for name, score in zip(older, conn.zmscore(out_key, older)):
            times[name] = int(score) if score is not None and math.isfinite(score) else None
    return times
