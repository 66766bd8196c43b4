"""benchmarks/aof_bytes.py: AOF bytes a claim and a done append, written with the history of
earlier runs."""

import json

import aof_bytes


def test_aof_bytes_are_measured_and_earlier_runs_kept(tmp_path):
    first = aof_bytes.main(["--claims", "200", "--out", str(tmp_path)])
    figures = first["figures"]
    # A claim writes out, claims, the holder's count and two counters: a few hundred bytes at
    # least (its item name alone appears in three commands); a done writes more.
    assert 200 < figures["bytes_per_claim"] < 2000
    assert figures["bytes_per_done"] > figures["bytes_per_claim"]
    second = aof_bytes.main(["--claims", "200", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "aof_bytes.json").read_text())
    assert written["figures"] == second["figures"]
    assert written["history"] == [
        {"date": first["date"], "commit": first["commit"]}
        | {k: figures[k] for k in ("bytes_per_claim", "bytes_per_done")}
    ]
    assert "per claim" in (tmp_path / "aof_bytes.md").read_text()
