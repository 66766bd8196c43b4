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


def _digits(text: str) -> bool:
    return text.isdecimal() and text.isascii()  # what Lua's %d+ matches


def parse(record: str | None) -> ClaimRecord:
    """RECORD's fields as the scripts read them (parse_claim of lua/includes/claim_record.lua);
    of a record they did not write, only the downloader (what stands before the first tab)."""
    fields = (record or "").split("\t")
    if len(fields) in (3, 4) and all(_digits(f) for f in fields[2:]):
        claimed_ms = int(fields[3]) if len(fields) == 4 else None
        return ClaimRecord(fields[0], fields[1], int(fields[2]), claimed_ms)
    return ClaimRecord(fields[0], fields[1] if len(fields) > 1 else "", None, None)


def claim_times(conn, out_key: str, records: dict) -> dict:
    """Claim time (ms, or None) of each name of RECORDS (name -> record text): from the record,
    or from `out` (one ZMSCORE) for records of three fields."""
    times = {name: parse(text).claimed_ms for name, text in records.items()}
    older = [name for name, ms in times.items() if ms is None]
    if older:
        for name, score in zip(older, conn.zmscore(out_key, older)):
            times[name] = int(score) if score is not None and math.isfinite(score) else None
    return times
