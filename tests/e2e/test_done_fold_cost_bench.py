"""benchmarks/done_fold_cost.py: the fold prototype counts every log entry once (its own check
fails the run otherwise), and its figures are written."""

import json

import pytest
import redis

import done_fold_cost


def test_the_fold_is_measured_and_counts_each_entry_once(tmp_path):
    done_fold_cost.main(["--entries", "40", "--downloaders", "1", "40", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "done_fold_cost.json").read_text())
    folds = written["folds"]
    assert [f["downloaders"] for f in folds] == [1, 40]
    # more downloaders in a batch: more writes an entry
    assert 0 < folds[0]["instructions_per_entry"] < folds[1]["instructions_per_entry"]
    assert written["client_xrange_instructions_per_entry"] > 0
    assert "| 40 | 40 |" in (tmp_path / "done_fold_cost.md").read_text()


def test_the_check_catches_an_entry_counted_twice(redis_url):
    conn = redis.Redis.from_url(redis_url)  # bytes, as the benchmark's own connection
    done_fold_cost.fill_log(conn, 5, 2)
    assert conn.eval(done_fold_cost.FOLD, len(done_fold_cost.KEYS), *done_fold_cost.KEYS, 5) == 5
    done_fold_cost.check(conn, 5, 2)
    conn.delete(done_fold_cost.KEYS[1])  # the cursor lost: the next fold would count them again
    with pytest.raises(AssertionError):
        done_fold_cost.check(conn, 5, 2)
