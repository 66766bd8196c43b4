"""A partial `pytest benchmarks/<file>` run keeps the other benchmarks' figures
(benchmarks/conftest.py, carry_over)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_conftest", ROOT / "benchmarks" / "conftest.py")
bench_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_conftest)


def _bench(fullname: str, median: float) -> dict:
    return {"fullname": fullname, "name": fullname.split("::")[1], "param": None, "stats": {"median": median}}


def test_a_partial_run_replaces_what_it_ran_and_carries_the_rest(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "test_a.py").write_text("def test_x(benchmark): pass\n")
    (tmp_path / "b" / "test_b.py").write_text("def test_y(benchmark): pass\n")
    previous = {
        "datetime": "2026-11-01T00:00:00",
        "commit_info": {"id": "abc"},
        "benchmarks": [
            _bench("b/test_a.py::test_x", 1.0),
            _bench("b/test_b.py::test_y[p]", 2.0),
            _bench("b/test_b.py::test_gone", 3.0),  # no longer defined: dropped
            _bench("b/test_removed.py::test_z", 4.0),  # file gone: dropped
        ],
    }
    output = {"benchmarks": [_bench("b/test_a.py::test_x", 9.0)]}
    merged = bench_conftest.carry_over(previous, output, tmp_path)
    assert [(b["fullname"], b["stats"]["median"], b.get("carried_from")) for b in merged["benchmarks"]] == [
        ("b/test_a.py::test_x", 9.0, None),
        ("b/test_b.py::test_y[p]", 2.0, {"datetime": "2026-11-01T00:00:00", "commit": "abc"}),
    ]


def test_a_figure_carried_twice_keeps_the_run_it_was_measured_in():
    older = {"datetime": "2026-10-01", "commit": "old"}
    previous = {
        "datetime": "2026-11-01",
        "commit_info": {"id": "abc"},
        "benchmarks": [{**_bench("benchmarks/conftest.py::test_q", 1.0), "carried_from": older}],
    }
    # benchmarks/conftest.py stands in for a file that defines nothing of that name: dropped.
    assert bench_conftest.carry_over(previous, {"benchmarks": []}, ROOT)["benchmarks"] == []
    previous["benchmarks"][0]["fullname"] = "benchmarks/conftest.py::carry_over"
    merged = bench_conftest.carry_over(previous, {"benchmarks": []}, ROOT)
    assert [b["carried_from"] for b in merged["benchmarks"]] == [older]
