"""benchmarks/aof_kill_window.py: a trial kills Redis, restarts it from its AOF and counts the
acknowledged writes it no longer has (the fault suite's loss window rests on it)."""

import json
import subprocess

import aof_kill_window


def test_a_trial_kills_restarts_and_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(aof_kill_window, "WATCH_S", 0.5)  # a smoke run: kill soon, seen or not
    assert aof_kill_window.main(["--trials", "1", "--out", str(tmp_path), "--scratch", str(tmp_path)]) == 0
    written = json.loads((tmp_path / "aof_kill_window.json").read_text())
    (only,) = written["trials"]
    assert only["acked"] > 0  # the client wrote while the disk was loaded
    assert only["kept"] <= only["acked"] + 1  # at most the one INCR whose answer the kill cut
    assert only["lost"] == max(0, only["acked"] - only["kept"]) == written["acknowledged_writes_lost_max"]
    assert [p.name for p in tmp_path.iterdir()] == ["aof_kill_window.json"]  # scratch removed
    # and nothing left writing to the disk: the disk load's dd went with its shell
    leftover = subprocess.run(["pgrep", "-f", f"of={tmp_path}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""


def test_a_postponed_buffer_is_one_waiting_behind_an_fsync():
    assert aof_kill_window.postponed({"aof_buffer_length": 30, "aof_pending_bio_fsync": 1})
    assert not aof_kill_window.postponed({"aof_buffer_length": 30, "aof_pending_bio_fsync": 0})
    assert not aof_kill_window.postponed({"aof_buffer_length": 0, "aof_pending_bio_fsync": 1})
