"""benchmarks/hash_encoding.py: claims alternate between a project whose settings and stats are
hashtables and one whose hashes are listpacks, and the figures of both are written."""

import json

import hash_encoding


def test_both_encodings_are_measured_and_written(tmp_path):
    result = hash_encoding.main(
        ["--rounds", "1", "--claims", "50", "--out", str(tmp_path), "--instructions", "0"]
    )
    written = json.loads((tmp_path / "hash_encoding.json").read_text())
    assert written["figures"] == result["figures"]
    assert set(written["figures"]) == {"hashtable", "listpack"}
    for figures in written["figures"].values():
        assert len(figures["rounds"]) == 1 and figures["median_us"] > 0
    assert "| listpack (as an older tracker left them) |" in (tmp_path / "hash_encoding.md").read_text()


def test_the_listpack_project_is_what_an_older_tracker_left(admin, r):
    # prepare asserts each hash's encoding; the listpack one keeps every field but the pads.
    hash_encoding.prepare(admin, "old", "listpack")
    hash_encoding.prepare(admin, "new", "hashtable")
    old, new = r.hgetall("{old}:stats"), r.hgetall("{new}:stats")
    assert len(old) == len(hash_encoding.OLD_COUNTERS) == len(new) - 1 == 58
