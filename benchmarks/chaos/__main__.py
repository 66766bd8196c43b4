"""`make chaos`: PYTHONPATH=benchmarks python -m chaos [--items N] [--rounds R] [--seed S] ..."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from chaos.run import Config, checked, run

RESULTS = Path(__file__).resolve().parent.parent / "results"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__)
    for f in fields(Config):
        if f.name in ("faults", "extra"):
            continue
        kind = type(f.default)
        flag = "--" + f.name.replace("_", "-")
        if kind is bool:
            parser.add_argument(flag, action="store_true", default=f.default)
        else:
            parser.add_argument(flag, type=kind, default=f.default)
    parser.add_argument(
        "--faults",
        default=",".join(Config.faults),
        help="comma-separated subset of the faults (with --cluster: worker_kill, parent_kill, "
        "primary_failover, clock_skew by default)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    args["faults"] = tuple(x for x in args.pop("faults").split(",") if x)
    try:
        cfg = checked(Config(**args))
    except ValueError as exc:
        parser.error(str(exc))
    report = run(cfg)
    report["command"] = "make chaos (" + " ".join(sys.argv[1:]) + ")" if sys.argv[1:] else "make chaos"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    summary = {
        k: report[k]
        for k in (
            "duration_s",
            "requests_total",
            "items_handed_out",
            "items_handed_out_twice",
            "violation_counts",
            "passed",
        )
    }
    print(json.dumps(summary, indent=2))
    print("recovery:", {f["fault"]: f["recovery_s"] for f in report["faults"]})
    print(f"written to {out}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
