"""hot_paths.json's carry-over of benchmarks a partial run did not run, the classification
figures, and hot_paths.md: compiled-vs-twin ratios, which survive a noisy shared machine."""

from __future__ import annotations

from pathlib import Path

from harness.results import provenance_line


def carry_over(previous: dict, output: dict, root: Path) -> dict:
    """OUTPUT with the benchmarks of PREVIOUS that this run did not run and that still exist
    (their file is there and still defines the test), each marked with the run it came from."""
    ran = {bench["fullname"] for bench in output["benchmarks"]}
    origin = {"date": previous.get("date"), "commit": previous.get("commit")}
    carried = []
    for bench in previous.get("benchmarks", []):
        fullname = bench.get("fullname", "")
        if fullname in ran or not _still_defined(root, fullname):
            continue
        carried.append({**bench, "carried_from": bench.get("carried_from", origin)})
    output["benchmarks"] = sorted(output["benchmarks"] + carried, key=lambda b: b["fullname"])
    return output


def _still_defined(root: Path, fullname: str) -> bool:
    path, _, test = fullname.partition("::")
    try:
        return f"def {test.split('[')[0]}(" in (root / path).read_text()
    except OSError:
        return False


def classify_figures(benchmarks: list[dict]) -> dict:
    """Names classified per second by each classifier of test_classify_bench.py, and the ratios."""
    figures = {
        bench["param"]: {
            "names_per_s": bench["extra_info"]["names_per_s"],
            "batch": bench["extra_info"]["batch"],
        }
        for bench in benchmarks
        if "test_classify_bench" in bench["fullname"] and "names_per_s" in bench.get("extra_info", {})
    }
    rate = {label: f["names_per_s"] for label, f in figures.items()}
    for a, b in (("compiled", "pure twin"), ("compiled", "re alternation")):
        if a in rate and b in rate:
            figures[f"{a} / {b}"] = round(rate[a] / rate[b], 1)
    return figures


def report(result: dict) -> str:
    medians: dict[tuple[str, str], float] = {}
    carried: set[str] = set()
    for bench in result["benchmarks"]:
        if not bench.get("stats"):  # skipped or disabled
            continue
        parts = (bench.get("param") or "").split("-")
        kinds = [p for p in parts if p == "compiled" or p.startswith("pure")]
        if not kinds:  # not a compiled-vs-twin pair
            continue
        rest = "-".join(p for p in parts if p != kinds[0])
        name = bench["name"].split("[")[0] + (f"[{rest}]" if rest else "")
        medians[(name, "compiled" if kinds[0] == "compiled" else "pure")] = bench["stats"]["median"]
        if "carried_from" in bench:
            carried.add(name)
    lines = [
        "# Hot paths: compiled vs pure-Python twin",
        "",
        provenance_line(result),
        "",
        "Median time per call; ratio = pure / compiled (higher means the compiled module helps more).",
        "Shared 2-core machine: absolute times are noisy, ratios less so. Rows marked * were not",
        "run this time: they are the previous run's (`carried_from` in hot_paths.json).",
        "",
        "| benchmark | compiled (µs) | pure (µs) | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in sorted({name for name, _ in medians}):
        compiled, pure = medians.get((name, "compiled")), medians.get((name, "pure"))
        if compiled is None or pure is None:
            continue
        ratio = f"{pure / compiled:.1f}x" if compiled and pure else "-"
        mark = " *" if name in carried else ""
        lines.append(f"| {name}{mark} | {compiled * 1e6:.3f} | {pure * 1e6:.3f} | {ratio} |")
    classify = result.get("classify", {})
    if classify:
        lines += [
            "",
            "## Classification over 1,000 patterns",
            "",
            "| classifier | names/s |",
            "| --- | ---: |",
        ]
        lines += [
            f"| {label} | {f['names_per_s']:,} |" for label, f in classify.items() if isinstance(f, dict)
        ]
        lines += [
            "",
            *(f"- {label}: {ratio}x" for label, ratio in classify.items() if not isinstance(ratio, dict)),
        ]
    return "\n".join(lines) + "\n"
