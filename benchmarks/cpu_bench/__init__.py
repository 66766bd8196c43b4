"""CPU per request (issue 16): what one `/request`, `/done` or new backfeed item costs the bjoern
worker (utime+stime from /proc) and Redis (`INFO cpu`, and `INFO commandstats` for the scripts'
own time), beside the request rate, with the hello-world floor and the claim script alone.

    .venv/bin/python benchmarks/cpu_per_request.py [--quick] [--seconds N] [--out DIR]

Modules: `meters` (the two CPU accounts), `servers` (one-worker tracker and hello-world),
`cases` (the five measurements), `history` and `report` (cpu.json with its history, cpu.md).
"""
