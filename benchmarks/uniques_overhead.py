"""What counting unique downloaders and IPs (two PFADDs in claim-15.lua) costs the claim path.

Runs the real claim script and the same script with its PFADD loop cut out, alternately, over
one raw connection to a private redis-server on 127.0.0.1, and writes the claim rates to
benchmarks/results/uniques_overhead.json. Bounded: a few seconds in all.

    .venv/bin/python benchmarks/uniques_overhead.py
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import tempfile
import time
from pathlib import Path

from tracker_core import scripts
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine

CLAIMS_PER_ROUND = 20_000
ROUNDS = 5
DOWNLOADERS = 1000
RESULTS = Path(__file__).with_name("results") / "uniques_overhead.json"


def without_uniques(script: scripts.Script) -> scripts.Script:
    source = re.sub(
        r"-- Counted after the block check.*?\n  end\nend\n", "", script.source, count=1, flags=re.S
    )
    assert "PFADD" not in source
    return scripts.Script(script.name, script.num_keys, source, hashlib.sha1(source.encode()).hexdigest())


def claim_rate(engine: Engine, admin: AdminContext) -> float:
    names = [f"it{n}" for n in range(CLAIMS_PER_ROUND)]
    item_verbs.add(admin, "bench", names)
    start = time.perf_counter()
    for n in range(CLAIMS_PER_ROUND):
        d = n % DOWNLOADERS
        engine.claim("bench", f"dl{d}", f"10.0.{d // 250}.{d % 250}", 1)
    elapsed = time.perf_counter() - start
    admin.conn.delete(*(engine.keys("bench").out, engine.keys("bench").claims))
    return CLAIMS_PER_ROUND / elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedRedis(Path(tmp), port=free_port()).start()
        try:
            admin = AdminContext.from_url(server.url)
            project_verbs.create(admin, "bench")
            engine = Engine(server.url)
            real = scripts.SCRIPTS["claim"]
            variants = {"claim-15 (with uniques)": real, "claim without PFADD": without_uniques(real)}
            rates: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(ROUNDS):
                for name, script in variants.items():
                    scripts.SCRIPTS["claim"] = script
                    rates[name].append(claim_rate(engine, admin))
            scripts.SCRIPTS["claim"] = real
        finally:
            server.stop()
    best = {name: max(r) for name, r in rates.items()}
    median = {name: sorted(r)[len(r) // 2] for name, r in rates.items()}
    result = {
        "what": "engine.claim (multi=1) per second, one raw connection, 1,000 downloaders",
        "claims_per_round": CLAIMS_PER_ROUND,
        "rounds": ROUNDS,
        "rates_per_s": {name: [round(x) for x in r] for name, r in rates.items()},
        "best_per_s": {name: round(x) for name, x in best.items()},
        "median_per_s": {name: round(x) for name, x in median.items()},
        "overhead_pct_of_median": round(
            100 * (1 - median["claim-15 (with uniques)"] / median["claim without PFADD"]), 1
        ),
        "note": "2 shared cores: rounds vary; compare medians of alternating rounds",
        "machine": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
