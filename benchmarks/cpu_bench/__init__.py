"""CPU per request (issue 16): what one `/request`, `/done` or new backfeed item costs the bjoern
worker (utime+stime from /proc) and Redis (`INFO cpu`, and `INFO commandstats` for the scripts'
own time), beside the request rate, with the hello-world floor and the claim script alone.

    PYTHONPATH=benchmarks python -m harness --only cpu [--quick] [--set seconds=N]

Modules: `meters` (the two CPU accounts), `cases` (the five measurements), `run` (the case, in
order), `history` and `report` (cpu.json with its history, cpu.md).
"""

from cpu_bench import run  # noqa: F401  (registers the case)
