"""Measure the whole server: the tracker under bjoern with a real Redis, driven by wrk and Locust.

Starts its own redis-server (temp dir, free port on 127.0.0.1), seeds a project through the admin
API, starts `tracker serve` with its default bjoern workers (two per core), and drives it with
wrk (benchmarks/wrk/*.lua) at several concurrency levels, keep-alive and `Connection: close` (as
warriors send it):
POST /P/request, /P/multi=10/request and /P/done. Beside each figure, measured in the same run:
a hello-world Falcon app on bjoern (the HTTP layer's ceiling), the claim and done scripts fed
through a pipelined connection (the data layer's ceiling), and the open-source tracker's figure
from issue 2. Then the Locust warriors (loadtest/) work seeded projects headless at a few user
counts, single and multi=10, with failures, abandoned claims and backfeed: IRSR, RTT, items/s,
404/429/5xx, latency percentiles, every item accounted for. Writes benchmarks/results/server.json,
server.md and server_*.png.

The capacity part (issue 16) answers how many workers to run: `/request` at 1, 2, 3, 4, 6 and 8
workers under bjoern and under granian (the same app), in alternating rounds, with CPU per request;
then p99 at 70% of the peak at a constant arrival rate (constant_rate.py, corrected for coordinated
omission) with the default worker count. Writes capacity.json (with the history of earlier runs)
and capacity.md.

    PYTHONPATH=benchmarks python -m harness --only server,capacity,anonymous_load [--quick]
    PYTHONPATH=benchmarks python -m harness --only p99 --set workers=2,4 --set aof=false

All traffic stays on 127.0.0.1 and every run is bounded in time; every process it starts is
stopped on the way out.

The modules, in the order a run uses them: plan (what runs), servers (the tracker and the
hello-world app), items (the to-do queue kept full), meter (Redis's accounting), wrk and sweeps
(the wrk runs), warriors (the Locust runs), data_layer (pipelined scripts), run (the whole run),
summary, report and sections (server.md), plots (server_*.png), parts (the harness cases); for the
capacity part granian_apps (the apps as granian factories), worker_counts (the sweep),
constant_rate (the open-loop client), capacity (the run) and capacity_report (capacity.md).
"""

from server_bench import parts  # noqa: E402,F401  (registers the cases)
